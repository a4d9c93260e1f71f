"""The engine room: the Spark session and what it runs on.

The session (embedded, spark-submit, Spark Connect), the catalogs it opens, the JARs it loads
(connectors, the project's own JVM classes), the clones a commit runs in, the read-only guard,
files by path on any store, and the JVM boundary (`jvm/`, the only py4j). Nothing here knows
about Delta's log: that is `tables.delta`, which builds on this room.
"""
