"""`make verify`: crash a real ingestion over and over, then prove each record landed exactly once.

Unit tests check each step of the commit protocol; only whole processes dying at awkward moments
show whether the steps add up. The harness generates known records into a landing directory and
keeps its own ledger of their ids (a CSV file, appended and fsynced, outside Spark). It runs
`lakehouse ingest` in subprocesses and kills them: once at each fault point of `tables.faults`
with each crash action, then at random times with SIGKILL or SIGTERM sent to the whole process
group (Python driver and JVM), restarting until the input is consumed. One Spark session then
reads the tables and the log: every ledger id must be in the target or the quarantine table,
none twice, and the app's log marker must be the last batch. It prints one summary line.

Crash actions at a fault point: SIGKILL (`kill`) and SIGTERM (`term`), each sent by the process
to itself at that place. Random kills send real SIGKILLs and SIGTERMs to the process group, so
the JVM also dies mid-batch.

Linux only (process groups are tracked through /proc). Each `lakehouse` process starts a JVM:
on 2 cores about 30 s from spawn to the stream's first write (17 s of them Spark and the
metastore), then about 16 s for its first batch and 7 s for each later one (commit 3.4 s, audit
1.9 s, recording the audit 1.5 s). So the default run (100,000 records, 200 random kills) takes
three to four hours there (the first full run took 4.3, partly beside CI); `--records 10000
--random-kills 10` took 13 minutes and `--quick` (1,200 records, the three between-writes fault
points, 2 random kills) about 5. The harness saves its progress in the work directory after
every step: stopped (Ctrl-C, SIGTERM, a lost machine), it goes on with `--workdir DIR --resume`,
and its figures cover every invocation.
"""
