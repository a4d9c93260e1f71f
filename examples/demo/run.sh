#!/usr/bin/env bash
# The demo: generate messy events, crash an ingestion right after a Delta commit, restart it,
# run it again (a no-op), then look at the table. Each `lakehouse` call is a new process.
# `make demo-s3` (s3.py) runs the same steps in DEMO_DIR, its events already uploaded to S3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "${DEMO_DIR:-$here}"
rm -rf .lakehouse landing

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

if [ -n "${DEMO_GENERATED:-}" ]; then
    step "1. Sample events were generated and uploaded to the landing zone on S3"
else
    step "1. Generate sample events into landing/events (duplicates, a file resent later, malformed lines)"
    python "$here/generate.py" landing/events
fi

step "2. Ingest, crashing the process right after batch 1's Delta commit (before the stream checkpoint)"
LAKEHOUSE_FAULT="after_commit:exit@1" lakehouse ingest events || echo "(process died with status $?, as injected)"

step "3. Restart: batch 1 is re-run by the stream, found in the log, and skipped"
lakehouse ingest events

step "4. Run the same ingestion again: nothing new has landed, nothing changes"
lakehouse ingest events

step "5. Table status"
lakehouse status events

step "6. The per-batch ledger, read from the Delta log"
lakehouse history events

step "7. SQL by table name: one row per event (the resent file added none), rejected lines in quarantine"
lakehouse sql "SELECT count(*) AS rows, count(DISTINCT event_id) AS distinct_events FROM events"
lakehouse sql "SELECT kind, count(*) AS events, round(sum(amount), 2) AS amount FROM events GROUP BY kind ORDER BY kind"
lakehouse sql "SELECT _lh_batch_id AS batch, _lh_reason AS reason, _lh_raw AS raw FROM events_quarantine"

step "8. Quality outcomes per batch: the duplicate audit and each expectation (lakehouse_quality)"
lakehouse quality events

step "9. Prove exactly-once from the log and the tables alone"
lakehouse verify events
