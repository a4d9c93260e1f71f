"""Storage layer: Spark/Delta session, table specs, creation, and the log's committed state."""
