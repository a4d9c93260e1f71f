"""The `lakehouse` command line (`python -m ingest.cli`, or the `lakehouse` console script).

`commands` holds the Typer app with the everyday commands (ingest, status, history, quality,
check, sql); `admin` the operator commands (replay, vacuum, optimize, apps, reset-app);
`deploy` serve and job-script; `common` the error contract and options they share; `output`
the table, JSON and CSV renderings.
"""
