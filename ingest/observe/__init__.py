"""What an ingest run shows while it runs: one JSON line per batch, Prometheus metrics, progress.

`facts` reads what a batch's ledger record says about its source (files and their sizes and
times, or Kafka offsets); `batch_log` appends one line per batch to `<home>/logs/batches.jsonl`;
`metrics` serves counters on 127.0.0.1 with prometheus-client; `progress` draws the backlog as a
rich progress bar on a terminal. The stream runner hands them each settled or failed batch
(`ingest.runner.run_pipeline(on_settled=..., on_failed=...)`); none of them can fail a batch.
"""
