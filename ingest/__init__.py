"""Ingestion layer: sources, the exactly-once batch commit, the stream runner and the CLI."""
