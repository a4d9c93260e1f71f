"""An SCD type 2 table whose source changes: fields appear and values outgrow their columns.

JSON files are read with the stream's reader (the config's schema) and committed as a restarted
stream would, through injected failures; the history is checked against a fold of the records
(the rule of tests/ingest/test_history.py, over the fields each record carried).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.admin.verdict import is_reconciled
from ingest.admin.verify import verify_table
from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.sources import FileSource
from ingest.sources.file_read import read_files
from tables.delta.history import read_ledger
from tables.delta.writer import TableWriter
from tables.errors import InjectedFaultError
from tables.spec import TableSpec

pytestmark = [pytest.mark.downstream, pytest.mark.evolution]

MakeTable = Callable[..., TableSpec]


@pytest.mark.slow
@pytest.mark.parametrize(
    "file_count",
    [
        pytest.param(6, id="6-files", marks=pytest.mark.long),  # make verify: about 165 s
        pytest.param(10, id="10-files", marks=pytest.mark.long),  # make verify: about 160 s
    ],
)
def test_random_json_with_a_new_field_and_wider_values_matches_the_fold(
    spark: SparkSession,
    make_table: MakeTable,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    file_count: int,
) -> None:
    """The source changes under an SCD type 2 table: JSON files read with the config's schema,
    a field `email` appearing from the first 30 % of the files on (`add_columns`), quantities
    past INT in the second half (`type_widening`), deletes, late versions; writes fail before
    and after their commit and after a schema commit; every file is sent again once landed. The
    history matches the fold of the records with the fields they carried."""
    spec = make_table(
        schema="id STRING NOT NULL, name STRING, qty INT, seq BIGINT, op STRING",
        keys=("id",),
        merge="upsert",
        sequence_by="seq",
        delete_when="op = 'd'",
        history="scd2",
        except_columns=("op",),
        schema_evolution="add_columns",
        type_widening=True,
    )
    rng = random.Random(23)
    files: list[list[dict[str, object]]] = []
    for n in range(file_count):
        part = []
        for _ in range(8):
            seq = rng.randrange(1, 400)  # late and out of order: any file may go back in time
            record: dict[str, object] = {"id": f"k{rng.randrange(5)}", "seq": seq * 10 + n}
            wide = n >= file_count // 2
            record.update(
                name=f"n{rng.randrange(3)}", qty=rng.randrange(5) * (3**21 if wide else 1)
            )
            record["op"] = "d" if rng.random() < 0.15 else "u"
            if n >= file_count * 3 // 10:
                record["email"] = f"e{rng.randrange(2)}"
            part.append(record)
        files.append(part)
    landing = tmp_path / "landing"
    landing.mkdir()
    faults = "before_write:raise%25,after_commit:raise%25,after_schema_commit:raise%50"
    monkeypatch.setenv("LAKEHOUSE_FAULT_SEED", "9")
    failures = 0
    for batch_id, part in enumerate(files):
        path = landing / f"{batch_id}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
        source = FileSource(str(landing), "json")
        monkeypatch.setenv("LAKEHOUSE_FAULT", faults)
        while True:  # a restarted stream reads the file again with the config's schema
            batch = read_files(spark, source, spec.data_schema(spark), [str(path)])
            try:
                writer = TableWriter(spark, spec, "app")
                commit_batch(
                    writer, batch_id, batch, CommitOptions(raw_format="json", max_attempts=1)
                )
                break
            except InjectedFaultError:
                failures += 1
        monkeypatch.delenv("LAKEHOUSE_FAULT")
        batch = read_files(spark, source, spec.data_schema(spark), [str(path)])
        again = commit_batch(
            TableWriter(spark, spec, "app"), batch_id, batch, CommitOptions(raw_format="json")
        )
        assert again.status == "skipped"

    assert failures > 0
    types = {f.name: f.dataType.simpleString() for f in spark.table(spec.name).schema.fields}
    assert (types["qty"], types["email"]) == ("bigint", "string")
    events = [
        (str(r["id"]), (r["name"], r["qty"], r.get("email")), int(r["seq"]), str(r["op"]))  # type: ignore[call-overload]
        for part in files
        for r in part
    ]
    assert json_history(spark, spec.name) == fold_versions(events)
    entries = [e for e in read_ledger(spark, spec.name) if e.meta.kind == "batch"]
    assert all(is_reconciled(e) for e in entries)
    assert verify_table(spark, spec).passed


def fold_versions(
    events: Sequence[tuple[str, tuple[object, ...], int, str]],
) -> dict[str, list[tuple[object, ...]]]:
    """`expected_history` over (key, tracked values, seq, op): (from, to, current, *values)."""
    out: dict[str, list[tuple[object, ...]]] = {}
    for key in sorted({e[0] for e in events}):
        by_seq: dict[int, tuple[str, tuple[object, ...], int, str]] = {}
        for event in (e for e in events if e[0] == key):
            if event[2] not in by_seq or (event[3] == "d" and by_seq[event[2]][3] != "d"):
                by_seq[event[2]] = event
        rows: list[list[object]] = []
        previous = None
        for seq in sorted(by_seq):
            event = by_seq[seq]
            starts = previous is None or previous[3] == "d" or previous[1] != event[1]
            if rows and rows[-1][1] is None and (event[3] == "d" or starts):
                rows[-1][1] = seq
            if event[3] != "d" and starts:
                rows.append([seq, None, True, *event[1]])
            previous = event
        for row in rows:
            row[2] = row[1] is None
        if rows:
            out[key] = [tuple(r) for r in rows]
    return out


def json_history(spark: SparkSession, table: str) -> dict[str, list[tuple[object, ...]]]:
    out: dict[str, list[tuple[object, ...]]] = {}
    rows = spark.table(table).orderBy("id", "_lh_valid_from").collect()
    for r in rows:
        out.setdefault(r["id"], []).append(
            (
                r["_lh_valid_from"],
                r["_lh_valid_to"],
                r["_lh_is_current"],
                r["name"],
                r["qty"],
                r["email"],
            )
        )
    return out
