"""`python -m ingest.cli`: the `lakehouse` command line."""

from ingest.cli.commands import main

main()
