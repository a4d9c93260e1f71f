"""Expectation suites, run through Great Expectations 1.x: the only module that imports it.

A table's declared `ExpectationSpec`s become one GX suite, validated on each batch's landable rows
before anything is written. GX reports, per expectation, the failing rows by their row hash (a
column the classifier adds), so each action can be applied exactly:
- `warn`: the batch commits whole; the failure is recorded;
- `quarantine`: the failing rows go to the quarantine table with the expectation's name as the
  reason, the rest commits; the decision depends only on the batch's rows, so a replay splits
  the batch the same way;
- `fail`: nothing is written and the stream stops, naming the expectation.

With a project directory, GX keeps its suites and validation results there and builds its HTML
Data Docs from them; without one the context is ephemeral (tests, one-off calls).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quality.malformed import ROW_HASH_COLUMN
from tables.errors import ConfigError, first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from tables.spec import ExpectationSpec, TableSpec

SAMPLE_SIZE = 5
#: Checks on the batch's columns rather than its rows: one check, passed or failed.
SCHEMA_CHECKS = frozenset({"column_exists", "column_type"})
DATASOURCE = "lakehouse"


@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation's verdict on one batch."""

    expectation: ExpectationSpec
    checked: int
    failing: int
    sample_keys: tuple[str, ...]
    failing_rows: frozenset[int]

    @property
    def passed(self) -> bool:
        """True if no row broke the expectation."""
        return self.failing == 0

    def as_record(self) -> dict[str, Any]:
        """The summary kept in the commit's ledger entry and the quality table."""
        return {
            "check": f"expect:{self.expectation.name}",
            "action": self.expectation.action,
            "status": "passed" if self.passed else "failed",
            "checked": self.checked,
            "failing": self.failing,
            "sample": list(self.sample_keys),
        }


@dataclass(frozen=True)
class GateOutcome:
    """All expectations' verdicts on one batch."""

    outcomes: tuple[ExpectationOutcome, ...]

    def failed(self, action: str) -> list[ExpectationOutcome]:
        """The failed expectations whose action is `action`."""
        return [o for o in self.outcomes if not o.passed and o.expectation.action == action]

    def records(self) -> list[dict[str, Any]]:
        """The per-expectation summaries, in declaration order."""
        return [o.as_record() for o in self.outcomes]


def should_stop(outcome: GateOutcome) -> bool:
    """True if an expectation with the `fail` action failed: the batch must not commit."""
    return bool(outcome.failed("fail"))


def quarantine_reasons(outcome: GateOutcome) -> dict[int, str]:
    """Row hash -> reason for every row a `quarantine` expectation rejects (all names joined)."""
    reasons: dict[int, list[str]] = {}
    for failed in outcome.failed("quarantine"):
        for row in failed.failing_rows:
            reasons.setdefault(row, []).append(failed.expectation.name)
    return {row: f"expectation failed: {', '.join(names)}" for row, names in reasons.items()}


def stop_message(outcome: GateOutcome, table: str, app_id: str, batch_id: int) -> str:
    """The one-line error for a batch stopped by `fail` expectations."""
    parts = [
        f"{o.expectation.name} ({o.failing} of {o.checked} rows"
        + (f", e.g. {', '.join(o.sample_keys)})" if o.sample_keys else ")")
        for o in outcome.failed("fail")
    ]
    return (
        f"batch {batch_id} of app id {app_id!r} broke expectation {'; '.join(parts)} on table "
        f"{table}, whose action is fail: nothing of the batch was committed; fix the source or "
        "the expectation, then run again"
    )


class ExpectationGate:
    """Validates batches of one table against its declared suite; one per run of a pipeline.

    The gate owns its GX context (made on first use: GX costs seconds to start) and a lock, as
    a GX context is not safe to share between threads.
    """

    def __init__(self, spec: TableSpec, project_dir: Path | None = None) -> None:
        if not spec.expectations:
            raise ValueError(f"table {spec.name} declares no expectations")
        self.spec = spec
        self.project_dir = project_dir
        self._definition: Any = None
        self._context: Any = None
        self._lock = threading.Lock()

    def validate(self, rows: DataFrame) -> GateOutcome:
        """Run the suite on `rows` (landable rows with the row-hash column) and collect verdicts."""
        index_columns = [ROW_HASH_COLUMN, *self.spec.keys]
        with self._lock:
            definition = self._validation_definition()
            try:
                result = definition.run(
                    batch_parameters={"dataframe": rows},
                    result_format={
                        "result_format": "COMPLETE",
                        "unexpected_index_column_names": index_columns,
                    },
                )
            except Exception as exc:
                raise ConfigError(
                    f"table {self.spec.name}: expectation suite could not run: {first_line(exc)}"
                ) from exc
        by_name = {e.name: e for e in self.spec.expectations}
        outcomes = []
        for item in result.results:
            name = (item.expectation_config.meta or {}).get("lakehouse_name")
            if name not in by_name:
                continue
            if item.exception_info and item.exception_info.get("raised_exception"):
                message = item.exception_info.get("exception_message") or "unknown error"
                raise ConfigError(
                    f"table {self.spec.name}: expectation {name} could not run: {message}"
                )
            outcomes.append(_outcome(by_name[name], item.success, item.result, self.spec.keys))
        order = [e.name for e in self.spec.expectations]
        outcomes.sort(key=lambda o: order.index(o.expectation.name))
        return GateOutcome(tuple(outcomes))

    def build_docs(self) -> str | None:
        """Build GX's HTML Data Docs from the stored validations; the index page's URL."""
        if self.project_dir is None:
            return None
        with self._lock:
            context = self._gx_context()
            context.build_data_docs()
            sites = context.get_docs_sites_urls()
        return str(sites[0]["site_url"]) if sites else None

    def _gx_context(self) -> Any:
        if self._context is None:
            self._context = _context(self.project_dir)
        return self._context

    def _validation_definition(self) -> Any:
        if self._definition is not None:
            return self._definition
        # Deferred: Great Expectations takes seconds to import; only a table with a suite pays it.
        import great_expectations as gx

        context = self._gx_context()
        source = context.data_sources.add_or_update_spark(name=DATASOURCE)
        asset_name = self.spec.name
        known = {asset.name: asset for asset in source.assets}
        asset = known.get(asset_name) or source.add_dataframe_asset(name=asset_name)
        definitions = {d.name: d for d in asset.batch_definitions}
        batch = definitions.get("batch") or asset.add_batch_definition_whole_dataframe("batch")
        suite = gx.ExpectationSuite(name=f"{self.spec.name}_suite")
        for expectation in self.spec.expectations:
            suite.add_expectation(to_gx(expectation))
        suite = context.suites.add_or_update(suite)
        self._definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=f"{self.spec.name}_batches", data=batch, suite=suite)
        )
        return self._definition


def to_gx(expectation: ExpectationSpec) -> Any:
    """Build the Great Expectations expectation for one declared check."""
    # Deferred: Great Expectations takes seconds to import; only a table with a suite pays it.
    import great_expectations.expectations as gxe

    meta = {"lakehouse_name": expectation.name, "action": expectation.action}
    column = expectation.column
    params = expectation.params
    if expectation.check == "not_null":
        return gxe.ExpectColumnValuesToNotBeNull(column=column, meta=meta)
    if expectation.check == "unique":
        return gxe.ExpectColumnValuesToBeUnique(column=column, meta=meta)
    if expectation.check == "between":
        return gxe.ExpectColumnValuesToBeBetween(
            column=column, min_value=params.get("min"), max_value=params.get("max"), meta=meta
        )
    if expectation.check == "in_set":
        return gxe.ExpectColumnValuesToBeInSet(
            column=column, value_set=list(params["values"]), meta=meta
        )
    if expectation.check == "regex":
        return gxe.ExpectColumnValuesToMatchRegex(column=column, regex=params["pattern"], meta=meta)
    if expectation.check == "column_exists":
        return gxe.ExpectColumnToExist(column=column, meta=meta)
    return gxe.ExpectColumnValuesToBeOfType(column=column, type_=params["type"], meta=meta)


def _outcome(
    expectation: ExpectationSpec, success: bool, result: Mapping[str, Any], keys: tuple[str, ...]
) -> ExpectationOutcome:
    if expectation.check in SCHEMA_CHECKS:
        return ExpectationOutcome(expectation, 1, 0 if success else 1, (), frozenset())
    failing_index = list(result.get("unexpected_index_list") or [])
    rows = frozenset(int(entry[ROW_HASH_COLUMN]) for entry in failing_index)
    samples = sorted({"|".join(str(entry.get(k)) for k in keys) for entry in failing_index})
    return ExpectationOutcome(
        expectation=expectation,
        checked=int(result.get("element_count") or 0),
        failing=0 if success else int(result.get("unexpected_count") or 0),
        sample_keys=tuple(samples[:SAMPLE_SIZE]),
        failing_rows=rows,
    )


def _context(project_dir: Path | None) -> Any:
    """A GX context on the project directory (or an ephemeral one), quiet, without progress bars."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    # Deferred: Great Expectations takes seconds to import; only a table with a suite pays it.
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    for name in ("great_expectations", "py4j"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if project_dir is None:
        context = gx.get_context(mode="ephemeral")
    else:
        project_dir.mkdir(parents=True, exist_ok=True)
        context = gx.get_context(mode="file", project_root_dir=str(project_dir))
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context
