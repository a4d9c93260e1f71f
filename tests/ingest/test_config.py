from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from ingest.config import load_config, parse_config
from ingest.triggers import is_available_now, parse_trigger
from tables.errors import ConfigError

GOOD = """
[lakehouse]
home = "state"
replay_window = "3 days"

[tables.events]
schema = "event_id STRING NOT NULL, amount DOUBLE"
keys = ["event_id"]

[pipelines.landing]
table = "events"
trigger = "30 seconds"
[pipelines.landing.source]
format = "json"
path = "landing"
max_files_per_trigger = 5
"""


def test_load_good_config(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.toml"
    path.write_text(GOOD)
    config = load_config(path)
    assert config.home == tmp_path / "state"
    pipeline = config.pipeline(None)
    assert pipeline.app_id == "landing"
    assert pipeline.source.path == str(tmp_path / "landing")
    assert pipeline.checkpoint == str(tmp_path / "state" / "checkpoints" / "landing")
    assert config.table("events").replay_window.days == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tables.events]\nschema='a STRING'\n", "missing required key 'keys'"),
        ("[tables.events]\nschema='a STRING'\nkeys=['a']\ncolour='red'\n", "unknown key"),
        ("[tablez]\n", "unknown key"),
        ("[tables.events\n", "invalid TOML"),
        ("[tables.'x; drop']\nschema='a STRING'\nkeys=['a']\n", "invalid table name"),
        (
            "[tables.e]\nschema='a STRING'\nkeys=['a']\n[pipelines.p]\ntable='nope'\n"
            "source={format='json', path='x'}\n",
            "not declared",
        ),
        (
            "[tables.e]\nschema='a STRING'\nkeys=['a']\n[pipelines.p]\ntable='e'\n"
            "trigger='sometimes'\nsource={format='json', path='x'}\n",
            "invalid trigger",
        ),
        (
            "[tables.e]\nschema='a STRING'\nkeys=['a']\n[pipelines.p]\ntable='e'\n"
            "source={format='xml', path='x'}\n",
            "format: must be one of",
        ),
    ],
)
def test_bad_configs_fail_with_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "lakehouse.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert "\n" not in str(info.value)


def test_missing_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml")


def test_pipeline_lookup_errors_name_the_declared_ones() -> None:
    config = parse_config({}, base=Path("/tmp"), path=None)
    with pytest.raises(ConfigError, match="none declared"):
        config.pipeline("x")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("available-now", {"availableNow": True}),
        ("30 seconds", {"processingTime": "30 seconds"}),
        ("every 5 minutes", {"processingTime": "5 minutes"}),
        ("250 milliseconds", {"processingTime": "250 milliseconds"}),
    ],
)
def test_triggers(text: str, expected: dict[str, object]) -> None:
    assert parse_trigger(text) == expected


def test_trigger_errors() -> None:
    assert is_available_now("available-now")
    with pytest.raises(ConfigError):
        parse_trigger("0 seconds")


@pytest.mark.parametrize(
    "text", ["\u0663 seconds", "\uff13 seconds", "3 \u017feconds", "3 se\u212aonds"]
)
def test_a_trigger_takes_ascii_digits_and_units_only(text: str) -> None:
    with pytest.raises(ConfigError, match="invalid trigger"):
        parse_trigger(text)


def test_a_long_refused_trigger_is_shortened_in_its_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_trigger("x" * 10_000)
    assert len(str(info.value)) < 200
    assert "(10000 characters)" in str(info.value)


def test_uri_locations_are_kept_as_given(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.toml"
    path.write_text(
        GOOD.replace('path = "landing"', 'path = "s3://bucket/landing"').replace(
            'trigger = "30 seconds"', 'trigger = "30 seconds"\ncheckpoint = "dbfs:/chk/landing"'
        )
    )
    pipeline = load_config(path).pipeline("landing")
    assert pipeline.source.path == "s3://bucket/landing"
    assert pipeline.checkpoint == "dbfs:/chk/landing"


def test_home_defaults_to_lakehouse_home_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "elsewhere"))
    assert parse_config({}, base=tmp_path, path=None).home == tmp_path / "elsewhere"


def test_dedup_keys(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.toml"
    path.write_text(
        GOOD.replace("amount DOUBLE", "amount DOUBLE, at TIMESTAMP").replace(
            'keys = ["event_id"]',
            'keys = ["event_id"]\ndedup = "window"\ndedup_column = "at"\ndedup_window = "7 days"',
        )
    )
    spec = load_config(path).table("events")
    assert (spec.dedup, spec.dedup_column, spec.dedup_window) == ("window", "at", timedelta(days=7))


EXPECTATIONS = """
[tables.events]
schema = "event_id STRING NOT NULL, kind STRING, amount DOUBLE"
keys = ["event_id"]
audit_policy = "repair"
[[tables.events.expectations]]
check = "between"
column = "amount"
min = 0
action = "quarantine"
[[tables.events.expectations]]
check = "in_set"
column = "kind"
values = ["click", "view"]
"""


def test_expectations_and_audit_policy(tmp_path: Path) -> None:
    config = parse_config(tomllib.loads(EXPECTATIONS), base=tmp_path, path=None)

    spec = config.table("events")

    assert spec.audit_policy == "repair"
    assert [(e.name, e.action, dict(e.params)) for e in spec.expectations] == [
        ("between(amount)", "quarantine", {"min": 0}),
        ("in_set(kind)", "warn", {"values": ["click", "view"]}),
    ]


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ('check = "between"\ncolumn = "amount"', "needs min, max or both"),
        ('check = "between"\ncolumn = "amount"\nmin = "zero"', "min and max must be numbers"),
        ('check = "regex"\ncolumn = "kind"\npattern = "(["', "invalid pattern"),
        ('check = "in_set"\ncolumn = "kind"\nvalues = []', "values must be a non-empty list"),
        ('check = "sorted"\ncolumn = "kind"', "unknown expectation check 'sorted'"),
        ('check = "not_null"\ncolumn = "kind"\naction = "drop"', "action must be one of"),
        (
            'check = "not_null"\ncolumn = "kind"\nmin = 1',
            "min: unknown argument(s) 'min'; allowed: none",
        ),
        ('check = "column_exists"\ncolumn = "kind"\naction = "quarantine"', "cannot quarantine"),
        ('column = "kind"', "missing required key 'check'"),
        ('check = "not_null"\ncolumn = "kind"\nextra = 1', "extra: unknown key(s) 'extra'"),
    ],
)
def test_bad_expectations_fail_with_one_line(tmp_path: Path, rule: str, message: str) -> None:
    text = (
        '[tables.events]\nschema = "event_id STRING NOT NULL, kind STRING, amount DOUBLE"\n'
        f'keys = ["event_id"]\n[[tables.events.expectations]]\n{rule}\n'
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(tomllib.loads(text), base=tmp_path, path=None)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_audit_policy_outside_the_three_is_refused(tmp_path: Path) -> None:
    text = '[tables.e]\nschema = "id STRING"\nkeys = ["id"]\naudit_policy = "ignore"\n'
    with pytest.raises(ConfigError, match="audit_policy: must be one of"):
        parse_config(tomllib.loads(text), base=tmp_path, path=None)


def test_record_rules_take_a_size_with_units_and_an_epoch_unit(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.toml"
    path.write_text(
        '[tables.t]\nschema = "id STRING, at TIMESTAMP"\nkeys = ["id"]\n'
        'max_record_bytes = "32 MiB"\ntimestamp_unit = "milliseconds"\n'
        '[tables.u]\nschema = "id STRING"\nkeys = ["id"]\n'
    )

    config = load_config(path)

    assert config.tables["t"].records.max_record_bytes == 32 * 1024 * 1024
    assert config.tables["t"].records.timestamp_unit == "milliseconds"
    assert config.tables["u"].records.max_record_bytes == 16 * 1024 * 1024
    assert config.tables["u"].records.timestamp_unit is None
