"""`make demo-s3`: the demo's flow with its tables, checkpoint and landing zone on S3.

A local S3-API server (s3proxy, fetched into the JAR cache like the test suite's) runs on
127.0.0.1 for the length of the demo; its objects stay in `examples/demo/s3/store` to look at.
The generated files are uploaded through the S3 API in their drop order, the demo's config is
written with `warehouse`, `checkpoint` and the landing `path` on `s3a://demo/...` and
`[lakehouse.storage]` pointing at the server, and run.sh's steps run against it: the same
crash, restart, no-op run and `verify` as on a local disk. The server's credentials reach
`lakehouse` through the environment only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support
from tests.support.s3_server import start_s3_server

HERE = Path(__file__).resolve().parent

BUCKET = "demo"


def s3_config(storage_toml: str) -> str:
    """The demo's lakehouse.toml with its tables, checkpoint and landing zone on S3."""
    text = (HERE / "lakehouse.toml").read_text()
    text = text.replace(
        'replay_window = "7 days"',
        f'replay_window = "7 days"\nwarehouse = "s3a://{BUCKET}/tables"\n\n{storage_toml}',
        1,
    )
    text = text.replace(
        'trigger = "available-now"',
        f'trigger = "available-now"\ncheckpoint = "s3a://{BUCKET}/checkpoints/events"',
        1,
    )
    return text.replace('path = "landing/events"', f'path = "s3a://{BUCKET}/landing/events"', 1)


def main() -> int:
    """Start the server, upload the landing files, run the demo's steps, stop the server."""
    work = HERE / "s3"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    local = work / "generated"
    subprocess.run([sys.executable, str(HERE / "generate.py"), str(local)], check=True)
    with start_s3_server(work / "store") as s3:
        s3.bucket(BUCKET)
        for path in sorted(local.iterdir(), key=lambda p: p.stat().st_mtime):
            s3.put(BUCKET, f"landing/events/{path.name}", path.read_bytes())
            time.sleep(1.1)  # S3 keeps seconds: one apart, the files keep their drop order
        (work / "lakehouse.toml").write_text(s3_config(s3.storage_toml()))
        env = {**os.environ, **s3.credentials(), "DEMO_DIR": str(work), "DEMO_GENERATED": "1"}
        return subprocess.run(["bash", str(HERE / "run.sh")], env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
