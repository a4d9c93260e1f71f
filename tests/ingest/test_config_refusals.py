"""Broken configs, one per row: each refused in one line that names the file and the key path.

The table covers every section and key (types, values, names equal when case is ignored, shared
app ids and checkpoints, overlapping locations, zero intervals, nested option values) and the
errors that used to surface only after Spark started (a key column not in the schema, a window
column that is not a time, a `raw` Kafka table with other columns). A sample goes through
`lakehouse ingest`, which must exit 1 with the same line and never ask for a Spark session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from ingest.config import assert_pipeline_ready, load_config
from tables.errors import ConfigError, ConfigFileError

runner = CliRunner()

BASE = """
[lakehouse]
home = "state"

[tables.events]
schema = "event_id STRING NOT NULL, amount DOUBLE, at TIMESTAMP, day DATE, tags ARRAY<STRING>"
keys = ["event_id"]
#TABLE

[pipelines.landing]
table = "events"
#PIPELINE
[pipelines.landing.source]
format = "json"
path = "landing"
#SOURCE
#END
"""

KAFKA = """
[tables.events]
schema = "key STRING, value STRING"
keys = ["key"]

[pipelines.clicks]
table = "events"
[pipelines.clicks.source]
kind = "kafka"
bootstrap_servers = "broker:9092"
topic = "clicks"
#SOURCE
"""


def table(lines: str) -> str:
    return BASE.replace("#TABLE", lines)


def pipeline(lines: str) -> str:
    return BASE.replace("#PIPELINE", lines)


def source(lines: str) -> str:
    return BASE.replace("#SOURCE", lines)


def csv_source(lines: str) -> str:
    return BASE.replace('format = "json"', 'format = "csv"').replace("#SOURCE", lines)


def end(lines: str) -> str:
    return BASE.replace("#END", lines)


def kafka(lines: str) -> str:
    return KAFKA.replace("#SOURCE", lines)


def expect(check: str) -> str:
    return table(f"[[tables.events.expectations]]\n{check}")


def window(column: str, length: str = '"1 day"') -> str:
    return table(f'dedup = "window"\ndedup_column = "{column}"\ndedup_window = {length}')


SECOND_PIPELINE = """
[pipelines.other]
table = "events"
#OTHER
[pipelines.other.source]
format = "json"
path = "landing2"
"""


def two(other: str) -> str:
    return end(SECOND_PIPELINE.replace("#OTHER", other))


#: (id, config text, key path named by the error, fragment of the reason)
CASES: list[tuple[str, str, str, str]] = [
    # [lakehouse]
    ("home-int", BASE.replace('home = "state"', "home = 5"), "lakehouse.home", "got integer 5"),
    ("home-bool", BASE.replace('home = "state"', "home = true"), "lakehouse.home", "got boolean"),
    ("home-empty", BASE.replace('home = "state"', 'home = ""'), "lakehouse.home", "non-empty"),
    ("home-uri", BASE.replace('"state"', '"s3a://b/h"'), "lakehouse.home", "is a URI"),
    ("home-file", BASE.replace('"state"', '"afile"'), "lakehouse.home", "is a file"),
    ("home-tilde", BASE.replace('"state"', '"~nouser_x/h"'), "lakehouse.home", "cannot resolve"),
    (
        "path-tilde",
        BASE.replace('path = "landing"', 'path = "~nouser_x/l"'),
        "pipelines.landing.source.path",
        "cannot resolve",
    ),
    (
        "queries-timeout-zero",
        BASE.replace(
            "[tables.events]", '[lakehouse.queries]\ntimeout = "0 seconds"\n\n[tables.events]'
        ),
        "lakehouse.queries.timeout",
        "must be longer than zero",
    ),
    (
        "queries-rows-zero",
        BASE.replace("[tables.events]", "[lakehouse.queries]\nmax_rows = 0\n\n[tables.events]"),
        "lakehouse.queries.max_rows",
        "must be at least 1, got 0",
    ),
    (
        "queries-unknown",
        BASE.replace("[tables.events]", "[lakehouse.queries]\nrows = 5\n\n[tables.events]"),
        "lakehouse.queries.rows",
        "unknown key(s) 'rows'; allowed: max_rows, timeout",
    ),
    (
        "replay-zero",
        BASE.replace("[lakehouse]", '[lakehouse]\nreplay_window = "0 days"'),
        "lakehouse.replay_window",
        "interval '0 days' must be longer than zero",
    ),
    (
        "replay-soon",
        BASE.replace("[lakehouse]", '[lakehouse]\nreplay_window = "soon"'),
        "lakehouse.replay_window",
        "invalid interval 'soon' (expected e.g. '7 days')",
    ),
    (
        "replay-int",
        BASE.replace("[lakehouse]", "[lakehouse]\nreplay_window = 7"),
        "lakehouse.replay_window",
        "expected a string, got integer 7",
    ),
    (
        "replay-huge",
        BASE.replace("[lakehouse]", '[lakehouse]\nreplay_window = "99999999999 weeks"'),
        "lakehouse.replay_window",
        "too long",
    ),
    (
        "settings-key",
        BASE.replace("[lakehouse]", "[lakehouse]\ncolour = 1"),
        "lakehouse.colour",
        "unknown key(s) 'colour'",
    ),
    ("settings-type", "lakehouse = 5\n", "lakehouse", "expected a table, got integer"),
    ("top-key", end("[tablez]\n"), "tablez", "unknown key(s) 'tablez'"),
    ("tables-type", "tables = 5\n", "tables", "expected a table, got integer"),
    # [tables.NAME]
    (
        "table-case",
        end("[tables.Events]\nschema = 'a STRING'\nkeys = ['a']"),
        "tables.Events",
        "same name when case is ignored",
    ),
    (
        "table-newline",
        end("[tables.\"t\\n\"]\nschema = 'a STRING'\nkeys = ['a']"),
        'tables."t\\n"',
        "invalid table name 't\\n'",
    ),
    (
        "table-reserved",
        end("[tables.lakehouse_quality]\nschema = 'a STRING'\nkeys = ['a']"),
        "tables.lakehouse_quality",
        "project's own table",
    ),
    (
        "table-quarantine",
        end("[tables.events_quarantine]\nschema = 'a STRING'\nkeys = ['a']"),
        "tables.events_quarantine",
        "quarantine table of table events",
    ),
    ("table-key", table("colour = 'red'"), "tables.events.colour", "unknown key(s) 'colour'"),
    ("table-type", end("[tables]\nx = 5"), "tables.x", "expected a table, got integer"),
    (
        "schema-missing",
        end("[tables.x]\nkeys = ['a']"),
        "tables.x.schema",
        "missing required key 'schema'",
    ),
    (
        "keys-missing",
        end("[tables.x]\nschema = 'a STRING'"),
        "tables.x.keys",
        "missing required key 'keys'",
    ),
    (
        "schema-int",
        end("[tables.x]\nschema = 5\nkeys = ['a']"),
        "tables.x.schema",
        "expected a string",
    ),
    ("schema-empty", end("[tables.x]\nschema = ' '\nkeys = ['a']"), "tables.x.schema", "non-empty"),
    (
        "schema-comma",
        end("[tables.x]\nschema = 'a STRING,,'\nkeys = ['a']"),
        "tables.x.schema",
        "column 2 is empty",
    ),
    (
        "schema-type-only",
        end("[tables.x]\nschema = 'int'\nkeys = ['int']"),
        "tables.x.schema",
        "has no type",
    ),
    (
        "schema-twice",
        end("[tables.x]\nschema = 'a STRING, A INT'\nkeys = ['a']"),
        "tables.x.schema",
        "declared twice: 'a', 'A'",
    ),
    (
        "schema-reserved",
        end("[tables.x]\nschema = 'a STRING, _lh_x INT'\nkeys = ['a']"),
        "tables.x.schema",
        "reserved prefix",
    ),
    (
        "schema-unbalanced",
        end("[tables.x]\nschema = 'a STRUCT<b: INT'\nkeys = ['a']"),
        "tables.x.schema",
        "unclosed bracket",
    ),
    (
        "keys-empty",
        end("[tables.x]\nschema = 'a STRING'\nkeys = []"),
        "tables.x.keys",
        "at least one",
    ),
    (
        "keys-absent",
        end("[tables.x]\nschema = 'a STRING'\nkeys = ['b']"),
        "tables.x.keys",
        "column 'b' is not in the schema",
    ),
    (
        "keys-int",
        end("[tables.x]\nschema = 'a STRING'\nkeys = [1]"),
        "tables.x.keys[0]",
        "expected a string, got integer",
    ),
    (
        "keys-bool",
        end("[tables.x]\nschema = 'a STRING'\nkeys = true"),
        "tables.x.keys",
        "expected an array of strings, got boolean",
    ),
    (
        "keys-csv",
        end("[tables.x]\nschema = 'a STRING, b INT'\nkeys = 'a, b'"),
        "tables.x.keys",
        "invalid column name 'a, b'",
    ),
    (
        "keys-repeat",
        end("[tables.x]\nschema = 'a STRING'\nkeys = ['a', 'a']"),
        "tables.x.keys",
        "columns repeat",
    ),
    (
        "keys-lineage",
        end("[tables.x]\nschema = 'a STRING'\nkeys = ['_lh_app_id']"),
        "tables.x.keys",
        "reserved prefix",
    ),
    (
        "keys-map",
        end("[tables.x]\nschema = 'a MAP<STRING, INT>'\nkeys = ['a']"),
        "tables.x.keys",
        "map or variant",
    ),
    (
        "keys-case",
        end("[tables.x]\nschema = 'event_id STRING'\nkeys = ['Event_ID']"),
        "tables.x.keys",
        "did you mean 'event_id'?",
    ),
    (
        "partition-absent",
        table("partition_by = ['nope']"),
        "tables.events.partition_by",
        "not in the schema",
    ),
    (
        "partition-nested",
        table("partition_by = ['tags']"),
        "tables.events.partition_by",
        "cannot partition by tags",
    ),
    (
        "partition-table",
        table("partition_by = {a = 1}"),
        "tables.events.partition_by",
        "expected an array of strings, got table",
    ),
    ("merge-choice", table("merge = 'replace'"), "tables.events.merge", "must be one of"),
    (
        "record-bytes-small",
        table("max_record_bytes = 100"),
        "tables.events.max_record_bytes",
        "must lie between 1,024 bytes (1 KiB) and 134,217,728 bytes (128 MiB), got 100",
    ),
    (
        "record-bytes-unit",
        table("max_record_bytes = '16 furlongs'"),
        "tables.events.max_record_bytes",
        'expected a size such as 16777216 or "16 MiB"',
    ),
    (
        "record-bytes-float",
        table("max_record_bytes = 1.5"),
        "tables.events.max_record_bytes",
        'expected a size such as 16777216 or "16 MiB"',
    ),
    (
        "timestamp-unit",
        table("timestamp_unit = 'nanoseconds'"),
        "tables.events.timestamp_unit",
        "must be one of ('seconds', 'milliseconds', 'microseconds')",
    ),
    (
        "upsert-no-sequence",
        table("merge = 'upsert'"),
        "tables.events.sequence_by",
        "needs sequence_by",
    ),
    (
        "sequence-on-insert",
        table("sequence_by = 'at'"),
        "tables.events.sequence_by",
        "merge = 'upsert' only",
    ),
    (
        "delete-on-insert",
        table('delete_when = "amount < 0"'),
        "tables.events.delete_when",
        "merge = 'upsert' only",
    ),
    (
        "sequence-not-ordered",
        table("merge = 'upsert'\nsequence_by = 'tags'"),
        "tables.events.sequence_by",
        "ordered by a number",
    ),
    (
        "sequence-is-key",
        table("merge = 'upsert'\nsequence_by = 'event_id'"),
        "tables.events.sequence_by",
        "record key column",
    ),
    (
        "upsert-dedup",
        table("merge = 'upsert'\nsequence_by = 'at'\ndedup = 'table'"),
        "tables.events.dedup",
        "insert' only",
    ),
    (
        "upsert-repair",
        table("merge = 'upsert'\nsequence_by = 'at'\naudit_policy = 'repair'"),
        "tables.events.audit_policy",
        "newest version",
    ),
    (
        "upsert-empty-delete",
        table("merge = 'upsert'\nsequence_by = 'at'\ndelete_when = ' '"),
        "tables.events.delete_when",
        "expected a non-empty string",
    ),
    (
        "upsert-two-writers",
        table("merge = 'upsert'\nsequence_by = 'at'").replace(
            "#END", SECOND_PIPELINE.replace("#OTHER", 'app_id = "other"')
        ),
        "pipelines.other.table",
        "one writer at a time",
    ),
    ("dedup-choice", table("dedup = 'global'"), "tables.events.dedup", "must be one of"),
    (
        "dedup-no-column",
        table("dedup = 'window'\ndedup_window = '1 day'"),
        "tables.events.dedup_column",
        "needs dedup_column",
    ),
    ("dedup-not-time", window("amount"), "tables.events.dedup_column", "amount is DOUBLE"),
    (
        "dedup-absent",
        window("nope"),
        "tables.events.dedup_column",
        "column 'nope' is not in the schema",
    ),
    (
        "dedup-zero",
        window("at", '"0 days"'),
        "tables.events.dedup_window",
        "must be longer than zero",
    ),
    (
        "dedup-soon",
        window("at", '"soon"'),
        "tables.events.dedup_window",
        "invalid interval 'soon' (expected e.g. '7 days')",
    ),
    (
        "dedup-int",
        window("at", "7"),
        "tables.events.dedup_window",
        "expected a string, got integer",
    ),
    (
        "dedup-not-window",
        table("dedup_column = 'at'"),
        "tables.events.dedup_column",
        "applies to dedup = 'window' only",
    ),
    (
        "prop-nested",
        table("properties = {a = {b = 1}}"),
        "tables.events.properties.a",
        "got table (nested values",
    ),
    ("prop-array", table("properties = {a = [1]}"), "tables.events.properties.a", "got array"),
    ("prop-date", table("properties = {a = 1979-05-27}"), "tables.events.properties.a", "got date"),
    (
        "prop-case",
        table("properties = {a = '1', A = '2'}"),
        "tables.events.properties.A",
        "set twice when case is ignored",
    ),
    ("prop-type", table("properties = 5"), "tables.events.properties", "expected a table"),
    (
        "prop-name",
        table("properties = {'a b' = 'x'}"),
        'tables.events.properties."a b"',
        "invalid option name",
    ),
    (
        "prop-retention",
        table("properties = {'delta.setTransactionRetentionDuration' = 'interval 1 days'}"),
        'tables.events.properties."delta.setTransactionRetentionDuration"',
        "shorter than the replay window",
    ),
    (
        "prop-retention-soon",
        table("properties = {'delta.setTransactionRetentionDuration' = 'soon'}"),
        'tables.events.properties."delta.setTransactionRetentionDuration"',
        "invalid interval 'soon'",
    ),
    (
        "audit-choice",
        table("audit_policy = 'ignore'"),
        "tables.events.audit_policy",
        "must be one of",
    ),
    (
        "unknown-fields-choice",
        table("unknown_fields = 'drop'"),
        "tables.events.unknown_fields",
        "must be one of ('rescue', 'quarantine', 'fail')",
    ),
    (
        "unknown-fields-bool",
        table("unknown_fields = true"),
        "tables.events.unknown_fields",
        "expected a string, got boolean",
    ),
    # [[tables.NAME.expectations]]
    (
        "expect-type",
        table("expectations = 5"),
        "tables.events.expectations",
        "expected an array of tables",
    ),
    (
        "expect-no-check",
        expect("column = 'amount'"),
        "tables.events.expectations[0].check",
        "missing required key 'check'",
    ),
    (
        "expect-check",
        expect("check = 'sorted'\ncolumn = 'amount'"),
        "tables.events.expectations[0].check",
        "unknown expectation check 'sorted'",
    ),
    (
        "expect-column",
        expect("check = 'not_null'\ncolumn = 'nope'"),
        "tables.events.expectations[0].column",
        "not in the schema",
    ),
    (
        "expect-column-name",
        expect("check = 'not_null'\ncolumn = \"a\\n\""),
        "tables.events.expectations[0].column",
        "invalid column name 'a\\n'",
    ),
    (
        "expect-bounds",
        expect("check = 'between'\ncolumn = 'amount'"),
        "tables.events.expectations[0].min",
        "needs min, max or both",
    ),
    (
        "expect-min-text",
        expect("check = 'between'\ncolumn = 'amount'\nmin = 'zero'"),
        "tables.events.expectations[0].min",
        "must be numbers",
    ),
    (
        "expect-max-bool",
        expect("check = 'between'\ncolumn = 'amount'\nmax = true"),
        "tables.events.expectations[0].max",
        "must be numbers",
    ),
    (
        "expect-crossed",
        expect("check = 'between'\ncolumn = 'amount'\nmin = 5\nmax = 1"),
        "tables.events.expectations[0].max",
        "below min",
    ),
    (
        "expect-values",
        expect("check = 'in_set'\ncolumn = 'amount'\nvalues = []"),
        "tables.events.expectations[0].values",
        "non-empty list",
    ),
    (
        "expect-values-nested",
        expect("check = 'in_set'\ncolumn = 'amount'\nvalues = [[1]]"),
        "tables.events.expectations[0].values",
        "strings, numbers or booleans",
    ),
    (
        "expect-values-string",
        expect("check = 'in_set'\ncolumn = 'amount'\nvalues = 'a'"),
        "tables.events.expectations[0].values",
        "non-empty list",
    ),
    (
        "expect-pattern",
        expect("check = 'regex'\ncolumn = 'amount'\npattern = '(['"),
        "tables.events.expectations[0].pattern",
        "invalid pattern",
    ),
    (
        "expect-spark-type",
        expect("check = 'column_type'\ncolumn = 'amount'\ntype = 'Double'"),
        "tables.events.expectations[0].type",
        "Spark type name",
    ),
    (
        "expect-action",
        expect("check = 'not_null'\ncolumn = 'amount'\naction = 'drop'"),
        "tables.events.expectations[0].action",
        "action must be one of",
    ),
    (
        "expect-schema-quarantine",
        expect("check = 'column_exists'\ncolumn = 'x'\naction = 'quarantine'"),
        "tables.events.expectations[0].action",
        "cannot quarantine",
    ),
    (
        "expect-argument",
        expect("check = 'not_null'\ncolumn = 'amount'\nmin = 1"),
        "tables.events.expectations[0].min",
        "unknown argument(s) 'min'",
    ),
    (
        "expect-key",
        expect("check = 'not_null'\ncolumn = 'amount'\nextra = 1"),
        "tables.events.expectations[0].extra",
        "unknown key(s) 'extra'",
    ),
    (
        "expect-twice",
        expect(
            "check = 'not_null'\ncolumn = 'amount'\n[[tables.events.expectations]]\n"
            "check = 'not_null'\ncolumn = 'amount'"
        ),
        "tables.events.expectations[1]",
        "not_null(amount) is declared twice",
    ),
    # [pipelines.NAME]
    (
        "pipeline-case",
        two("").replace("pipelines.other", "pipelines.Landing"),
        "pipelines.Landing",
        "same name when case is ignored",
    ),
    (
        "pipeline-name",
        BASE.replace("pipelines.landing", 'pipelines."landing\\n"'),
        'pipelines."landing\\n"',
        "invalid pipeline name",
    ),
    (
        "app-id-shared",
        two("app_id = 'landing'"),
        "pipelines.other.app_id",
        "already used by pipelines.landing",
    ),
    (
        "app-id-case",
        two("app_id = 'LANDING'"),
        "pipelines.other.app_id",
        "already used by pipelines.landing",
    ),
    (
        "app-id-newline",
        pipeline('app_id = "events-landing\\n"'),
        "pipelines.landing.app_id",
        "invalid app id 'events-landing\\n'",
    ),
    (
        "app-id-int",
        pipeline("app_id = 5"),
        "pipelines.landing.app_id",
        "expected a string, got integer",
    ),
    (
        "checkpoint-shared",
        two("checkpoint = 'state/checkpoints/landing'"),
        "pipelines.other.checkpoint",
        "the same as the checkpoint of pipelines.landing",
    ),
    (
        "checkpoint-nested",
        two("checkpoint = 'state/checkpoints/landing/inner'"),
        "pipelines.other.checkpoint",
        "nested with the checkpoint",
    ),
    (
        "checkpoint-warehouse",
        pipeline("checkpoint = 'state/warehouse/events/_chk'"),
        "pipelines.landing.checkpoint",
        "inside the warehouse",
    ),
    (
        "checkpoint-home",
        pipeline("checkpoint = 'state'"),
        "pipelines.landing.checkpoint",
        "the lakehouse home itself",
    ),
    (
        "checkpoint-landing",
        pipeline("checkpoint = 'landing/_chk'"),
        "pipelines.landing.source.path",
        "overlaps the checkpoint",
    ),
    ("checkpoint-empty", pipeline("checkpoint = ''"), "pipelines.landing.checkpoint", "non-empty"),
    (
        "checkpoint-nul",
        pipeline('checkpoint = "chk\\u0000"'),
        "pipelines.landing.checkpoint",
        "control characters",
    ),
    (
        "pipeline-table",
        BASE.replace('table = "events"', 'table = "nope"'),
        "pipelines.landing.table",
        "not declared under [tables]",
    ),
    (
        "pipeline-table-int",
        BASE.replace('table = "events"', "table = 5"),
        "pipelines.landing.table",
        "expected a string",
    ),
    ("pipeline-key", pipeline("colour = 1"), "pipelines.landing.colour", "unknown key(s)"),
    (
        "trigger-zero",
        pipeline("trigger = '0 seconds'"),
        "pipelines.landing.trigger",
        "invalid trigger '0 seconds'",
    ),
    (
        "trigger-int",
        pipeline("trigger = 30"),
        "pipelines.landing.trigger",
        "expected a string, got integer",
    ),
    (
        "source-missing",
        end("[pipelines.x]\ntable = 'events'"),
        "pipelines.x.source",
        "missing required key 'source'",
    ),
    (
        "source-string",
        end("[pipelines.x]\ntable = 'events'\nsource = 'landing'"),
        "pipelines.x.source",
        "expected a table, got string",
    ),
    (
        "same-landing",
        end(SECOND_PIPELINE.replace("#OTHER", "").replace("landing2", "landing")),
        "pipelines.other.source.path",
        "every file would land twice",
    ),
    # [pipelines.NAME.source]
    (
        "kind",
        source("kind = 'ftp'"),
        "pipelines.landing.source.kind",
        "must be one of ('files', 'kafka')",
    ),
    (
        "format",
        BASE.replace('format = "json"', 'format = "xml"'),
        "pipelines.landing.source.format",
        "must be one of",
    ),
    (
        "format-missing",
        BASE.replace('format = "json"', ""),
        "pipelines.landing.source.format",
        "missing required key",
    ),
    (
        "path-missing",
        BASE.replace('path = "landing"', ""),
        "pipelines.landing.source.path",
        "missing required key",
    ),
    (
        "path-int",
        BASE.replace('path = "landing"', "path = 5"),
        "pipelines.landing.source.path",
        "expected a string",
    ),
    (
        "path-warehouse",
        BASE.replace('path = "landing"', 'path = "state/warehouse/x"'),
        "pipelines.landing.source.path",
        "inside the warehouse",
    ),
    (
        "max-files-bool",
        source("max_files_per_trigger = true"),
        "pipelines.landing.source.max_files_per_trigger",
        "expected an integer, got boolean",
    ),
    (
        "max-files-zero",
        source("max_files_per_trigger = 0"),
        "pipelines.landing.source.max_files_per_trigger",
        "at least 1",
    ),
    (
        "max-files-float",
        source("max_files_per_trigger = 1.5"),
        "pipelines.landing.source.max_files_per_trigger",
        "got float",
    ),
    (
        "option-nested",
        source("options = {multiLine = {a = 1}}"),
        "pipelines.landing.source.options.multiLine",
        "nested values",
    ),
    (
        "option-mode",
        source("options = {mode = 'FAILFAST'}"),
        "pipelines.landing.source.options.mode",
        "set by the source itself",
    ),
    (
        "option-max-files",
        source("options = {maxFilesPerTrigger = 3}"),
        "pipelines.landing.source.options.maxFilesPerTrigger",
        "use max_files_per_trigger",
    ),
    (
        "option-clean-source",
        source("options = {cleanSource = 'delete'}"),
        "pipelines.landing.source.options.cleanSource",
        "use clean_source",
    ),
    (
        "clean-source-unknown",
        source("clean_source = 'move'"),
        "pipelines.landing.source.clean_source",
        "must be one of ('off', 'archive', 'delete')",
    ),
    (
        "archive-without-dir",
        source("clean_source = 'archive'"),
        "pipelines.landing.source.archive_dir",
        "needs archive_dir",
    ),
    (
        "archive-dir-without-archive",
        source("clean_source = 'delete'\narchive_dir = 'done'"),
        "pipelines.landing.source.archive_dir",
        'only for clean_source = "archive"',
    ),
    (
        "archive-dir-inside-landing",
        source("clean_source = 'archive'\narchive_dir = 'landing/done'"),
        "pipelines.landing.source.archive_dir",
        "one inside the other",
    ),
    (
        "archive-dir-other-store",
        source("clean_source = 'archive'\narchive_dir = 's3a://bucket/done'"),
        "pipelines.landing.source.archive_dir",
        "on another store",
    ),
    (
        "option-case",
        source("options = {header = 'true', HEADER = 'false'}"),
        "pipelines.landing.source.options.HEADER",
        "set twice",
    ),
    (
        "option-name",
        source("options = {'multi line' = 'true'}"),
        'pipelines.landing.source.options."multi line"',
        "invalid option name",
    ),
    (
        "option-csv-null-value",
        csv_source("options = {nullValue = 'NA'}"),
        "pipelines.landing.source.options.nullValue",
        "option 'nullValue' is not honoured by the exact CSV reader (it would be ignored); "
        "supported: header, sep, delimiter, quote, escape,",
    ),
    (
        "option-csv-date-format",
        csv_source("options = {DateFormat = 'dd.MM.yyyy'}"),
        "pipelines.landing.source.options.DateFormat",
        "not honoured by the exact CSV reader",
    ),
    (
        "option-csv-line-sep",
        csv_source("options = {lineSep = ';'}"),
        "pipelines.landing.source.options.lineSep",
        "not honoured by the exact CSV reader",
    ),
    (
        "option-csv-single-line",
        csv_source("options = {multiLine = false}"),
        "pipelines.landing.source.options.multiLine",
        "CSV records always end at a line break outside quotes",
    ),
    (
        "option-csv-quote-two-characters",
        csv_source("options = {quote = \"''\"}"),
        "pipelines.landing.source.options.quote",
        "quote must be one character, or empty to turn quoting off; got \"''\"",
    ),
    (
        "option-csv-escape-two-characters",
        csv_source("options = {Escape = '\\\\'}"),
        "pipelines.landing.source.options.Escape",
        "escape must be one character, or empty to turn escaping off",
    ),
    (
        "option-csv-empty-separator",
        csv_source("options = {sep = ''}"),
        "pipelines.landing.source.options.sep",
        "sep must not be empty",
    ),
    (
        "option-csv-header-not-boolean",
        csv_source("options = {header = 'yes'}"),
        "pipelines.landing.source.options.header",
        "header must be true or false, got 'yes'",
    ),
    (
        "option-json-encoding",
        source("options = {encoding = 'ISO-8859-1'}"),
        "pipelines.landing.source.options.encoding",
        "not honoured by the exact JSON reader (it would be ignored); supported: lineSep,",
    ),
    (
        "option-json-lenient",
        source("options = {allowSingleQuotes = true}"),
        "pipelines.landing.source.options.allowSingleQuotes",
        "not honoured by the exact JSON reader",
    ),
    (
        "option-json-corrupt-files",
        source("options = {ignoreCorruptFiles = true}"),
        "pipelines.landing.source.options.ignoreCorruptFiles",
        "not honoured by the exact JSON reader",
    ),
    (
        "option-json-multiline",
        source("options = {MultiLine = true}"),
        "pipelines.landing.source.options.MultiLine",
        "multiLine is refused",
    ),
    ("source-key", source("colour = 1"), "pipelines.landing.source.colour", "unknown key(s)"),
    (
        "schema-unknown-type",
        BASE.replace("amount DOUBLE", "amount DUBBLE"),
        "tables.events.schema",
        "unknown type 'DUBBLE' for column amount",
    ),
    (
        "schema-unknown-element-type",
        BASE.replace("ARRAY<STRING>", "ARRAY<STRNG>"),
        "tables.events.schema",
        "unknown type 'STRNG' for column tags",
    ),
    (
        "schema-varchar-without-length",
        BASE.replace("amount DOUBLE", "amount VARCHAR"),
        "tables.events.schema",
        "type VARCHAR needs a length",
    ),
    (
        "schema-type-parameters",
        BASE.replace("amount DOUBLE", "amount double(10)"),
        "tables.events.schema",
        "type DOUBLE takes no parameters for column amount",
    ),
    # Kafka sources
    (
        "kafka-servers-missing",
        KAFKA.replace('bootstrap_servers = "broker:9092"', ""),
        "pipelines.clicks.source.bootstrap_servers",
        "missing required key",
    ),
    (
        "kafka-servers",
        KAFKA.replace("broker:9092", "broker"),
        "pipelines.clicks.source.bootstrap_servers",
        "use host:port",
    ),
    (
        "kafka-both",
        kafka("pattern = 'c.*'"),
        "pipelines.clicks.source.topic",
        "exactly one of topic and pattern",
    ),
    (
        "kafka-topic",
        KAFKA.replace('"clicks"\n#', '"a b"\n#'),
        "pipelines.clicks.source.topic",
        "invalid Kafka topic 'a b'",
    ),
    (
        "kafka-offsets",
        kafka("starting_offsets = 'middle'"),
        "pipelines.clicks.source.starting_offsets",
        "must be 'earliest', 'latest'",
    ),
    (
        "kafka-prefix",
        kafka("options = {'kafka.security.protocol' = 'SSL'}"),
        'pipelines.clicks.source.options."kafka.security.protocol"',
        "leave out the 'kafka.' prefix",
    ),
    (
        "kafka-reserved",
        kafka("options = {'bootstrap.servers' = 'x:1'}"),
        'pipelines.clicks.source.options."bootstrap.servers"',
        "set by the source itself",
    ),
    (
        "kafka-nested",
        kafka("options = {'sasl.jaas.config' = ['x']}"),
        'pipelines.clicks.source.options."sasl.jaas.config"',
        "got array",
    ),
    (
        "kafka-max-bool",
        kafka("max_offsets_per_trigger = true"),
        "pipelines.clicks.source.max_offsets_per_trigger",
        "got boolean",
    ),
    (
        "kafka-format",
        kafka("value_format = 'avro'"),
        "pipelines.clicks.source.value_format",
        "must be one of",
    ),
    (
        "kafka-raw-schema",
        kafka("value_format = 'raw'").replace(
            "key STRING, value STRING", "key STRING, body STRING"
        ),
        "pipelines.clicks.source.value_format",
        "needs table events to have the columns key",
    ),
    ("kafka-key", kafka("colour = 1"), "pipelines.clicks.source.colour", "unknown key(s)"),
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "landing").mkdir()
    (tmp_path / "landing2").mkdir()
    (tmp_path / "afile").write_text("not a directory")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKEHOUSE_DEBUG", raising=False)
    return tmp_path


def test_there_are_at_least_sixty_distinct_broken_configs() -> None:
    assert len(CASES) >= 60
    assert len({case[0] for case in CASES}) == len(CASES)
    assert len({case[1] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("text", "key", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_broken_config_is_refused_naming_the_file_and_key(
    project: Path, text: str, key: str, fragment: str
) -> None:
    (project / "lakehouse.toml").write_text(text)
    with pytest.raises(ConfigFileError) as info:
        load_config(Path("lakehouse.toml"))
    message = str(info.value)
    assert message.startswith(f"lakehouse.toml: {key}: "), message
    assert fragment in message, message
    assert "\n" not in message


def test_a_sample_through_the_cli_exits_1_with_the_same_line(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tables.engine.session

    asked: list[Any] = []
    monkeypatch.setattr(tables.engine.session, "get_spark", lambda *a, **k: asked.append(a))
    command = typer.main.get_command(app)
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: command)
    sample = CASES[::5]
    for name, text, key, _fragment in sample:
        (project / "lakehouse.toml").write_text(text)
        with pytest.raises(ConfigFileError) as info:
            load_config(Path("lakehouse.toml"))
        result = runner.invoke(app, ["ingest"])
        assert result.exit_code == 1, (name, result.output)
        assert result.stderr == f"error: {info.value}\n", (name, result.stderr)
        assert f"lakehouse.toml: {key}: " in result.stderr
    assert len(sample) >= 12
    assert asked == []


def test_the_brief_s_example_line(project: Path) -> None:
    (project / "lakehouse.toml").write_text(window("at", '"soon"'))
    with pytest.raises(ConfigError) as info:
        load_config(Path("lakehouse.toml"))
    assert str(info.value) == (
        "lakehouse.toml: tables.events.dedup_window: "
        "invalid interval 'soon' (expected e.g. '7 days')"
    )


def test_a_config_that_is_not_utf8_is_refused_in_one_line(project: Path) -> None:
    (project / "lakehouse.toml").write_bytes(b'[tables.caf\xe9]\nschema = "a STRING"\n')
    with pytest.raises(ConfigFileError) as info:
        load_config(Path("lakehouse.toml"))
    assert str(info.value) == (
        "lakehouse.toml: not UTF-8 text: byte 0xe9 at line 1 (save the file as UTF-8)"
    )
    result = runner.invoke(app, ["ingest"])
    assert result.exit_code == 1
    assert result.stderr == f"error: {info.value}\n"


def test_a_utf8_byte_order_mark_is_read_as_utf8(project: Path) -> None:
    (project / "lakehouse.toml").write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert set(load_config(Path("lakehouse.toml")).tables) == {"events"}


def test_invalid_toml_names_the_file_and_the_line(project: Path) -> None:
    (project / "lakehouse.toml").write_text("[tables.events\n")
    with pytest.raises(ConfigFileError, match=r"^lakehouse.toml: invalid TOML: .*line 1"):
        load_config(Path("lakehouse.toml"))


def test_option_values_keep_their_text_and_booleans_read_as_spark_writes_them(
    project: Path,
) -> None:
    parquet = BASE.replace('format = "json"', 'format = "parquet"')
    (project / "lakehouse.toml").write_text(
        parquet.replace("#SOURCE", "options = {mergeSchema = true, ratio = 0.5, mode2 = 'x'}")
    )
    options = load_config(Path("lakehouse.toml")).pipeline("landing").source.options
    assert options == {"mergeSchema": "true", "ratio": "0.5", "mode2": "x"}


def test_reader_option_names_are_matched_with_case_ignored_as_spark_does(project: Path) -> None:
    (project / "lakehouse.toml").write_text(csv_source("options = {Header = false, SEP = ';'}"))
    options = load_config(Path("lakehouse.toml")).pipeline("landing").source.options
    assert options == {"header": "false", "sep": ";"}
    (project / "lakehouse.toml").write_text(source("options = {LINESEP = ';', dateformat = 'y'}"))
    options = load_config(Path("lakehouse.toml")).pipeline("landing").source.options
    assert options == {"lineSep": ";", "dateFormat": "y"}


def test_unknown_fields_is_read_into_the_table_spec(project: Path) -> None:
    (project / "lakehouse.toml").write_text(table("unknown_fields = 'quarantine'"))
    assert load_config(Path("lakehouse.toml")).table("events").unknown_fields == "quarantine"
    (project / "lakehouse.toml").write_text(BASE)
    assert load_config(Path("lakehouse.toml")).table("events").unknown_fields == "rescue"


def test_table_lookups_ignore_case_as_the_catalog_does(project: Path) -> None:
    (project / "lakehouse.toml").write_text(BASE)
    config = load_config(Path("lakehouse.toml"))
    assert config.table("EVENTS").name == "events"
    assert "Events" in config.tables
    assert config.pipeline("LANDING").name == "landing"


@pytest.mark.parametrize(
    ("prepare", "key", "fragment"),
    [
        (lambda root: None, "source.path", "landing directory"),
        (lambda root: (root / "landing").write_text("x"), "source.path", "is a file"),
        (
            lambda root: [
                (root / "landing").mkdir(),
                (root / "state" / "checkpoints").mkdir(parents=True),
                (root / "state" / "checkpoints" / "landing").write_text("x"),
            ],
            "checkpoint",
            "is a file, not a directory",
        ),
    ],
    ids=["landing-missing", "landing-is-a-file", "checkpoint-is-a-file"],
)
def test_ingest_refuses_an_unusable_local_location_before_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepare: Any, key: str, fragment: str
) -> None:
    import tables.engine.session

    asked: list[Any] = []
    monkeypatch.setattr(tables.engine.session, "get_spark", lambda *a, **k: asked.append(a))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lakehouse.toml").write_text(BASE)
    prepare(tmp_path)
    result = runner.invoke(app, ["ingest", "landing"])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: lakehouse.toml: pipelines.landing.{key}: ")
    assert fragment in result.stderr
    assert result.stderr.count("\n") == 1
    assert asked == []
    with pytest.raises(ConfigFileError):
        assert_pipeline_ready(load_config(Path("lakehouse.toml")).pipeline("landing"))


def test_other_commands_do_not_need_the_landing_directory(project: Path) -> None:
    (project / "lakehouse.toml").write_text(BASE.replace('path = "landing"', 'path = "gone"'))
    config = load_config(Path("lakehouse.toml"))
    assert config.pipeline("landing").source.path == str(project / "gone")


def test_a_bad_trigger_override_is_refused_before_spark(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tables.engine.session

    asked: list[Any] = []
    monkeypatch.setattr(tables.engine.session, "get_spark", lambda *a, **k: asked.append(a))
    (project / "lakehouse.toml").write_text(BASE)
    result = runner.invoke(app, ["ingest", "--trigger", "0 seconds"])
    assert result.exit_code == 1
    assert result.stderr == (
        "error: --trigger: invalid trigger '0 seconds': use 'available-now' or an interval such "
        "as '30 seconds'\n"
    )
    assert asked == []


def test_a_type_error_spark_finds_names_the_schema_key(spark: SparkSession, project: Path) -> None:
    text = BASE.replace("amount DOUBLE", "amount DECIMAL(40, 2)")
    (project / "lakehouse.toml").write_text(text)
    spec = load_config(Path("lakehouse.toml")).table("events")
    with pytest.raises(ConfigError) as info:
        spec.data_schema(spark)
    message = str(info.value)
    assert message.startswith("lakehouse.toml: tables.events.schema: cannot parse 'event_id ")
    assert "precision 40" in message
    assert "\n" not in message


def test_run_pipeline_checks_the_landing_directory_before_creating_the_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    from ingest.config import PipelineSpec
    from ingest.runner import run_pipeline
    from ingest.sources import FileSource
    from tables.delta.table import table_exists
    from tables.spec import TableSpec

    spec = TableSpec("refused_before_create", "event_id STRING", ("event_id",))
    pipeline = PipelineSpec(
        name="gone",
        table=spec.name,
        app_id="gone",
        source=FileSource(str(tmp_path / "gone"), "json"),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )
    with pytest.raises(ConfigFileError, match=r"^pipeline gone: source\.path: landing directory"):
        run_pipeline(spark, pipeline, spec)
    assert not table_exists(spark, spec.name)


def test_a_missing_landing_directory_seen_only_by_spark_names_the_config_key(
    spark: SparkSession, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ingest.runner
    from ingest.runner import run_pipeline

    # A URI landing directory (s3a://...) passes the local check before Spark: only Spark sees it.
    monkeypatch.setattr(ingest.runner, "assert_pipeline_ready", lambda *a, **k: None)
    (project / "lakehouse.toml").write_text(BASE.replace('path = "landing"', 'path = "gone"'))
    config = load_config(Path("lakehouse.toml"))

    with pytest.raises(ConfigFileError) as info:
        run_pipeline(spark, config.pipeline("landing"), config.table("events"))

    assert str(info.value) == (
        "lakehouse.toml: pipelines.landing.source.path: "
        f"landing directory {project / 'gone'} does not exist"
    )
