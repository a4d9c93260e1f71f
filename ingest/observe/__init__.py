"""What an ingest run shows while it runs: one JSON line per batch, Prometheus metrics, progress.

`facts` reads what a batch's ledger record says about its source (files and their sizes and
times, or Kafka offsets); `batch_log` appends one line per batch to `<home>/logs/batches.jsonl`;
`metrics` serves counters on 127.0.0.1 with prometheus-client; `progress` draws the backlog as a
rich progress bar on a terminal. Each is a `observer.RunObserver`, which the stream runner tells
of each batch committed, settled or failed (`ingest.runner.run_pipeline(..., observer)`);
`observer.Observers` hands the events to several, and none of them can fail a batch.
"""
