"""The `lakehouse.toml` file: tables and pipelines declared once, checked before Spark starts.

- `loader`: every section and key with its TOML type, into TableSpec and PipelineSpec;
- `checks`: what is wrong only in combination (shared app ids, checkpoints, names equal when
  case is ignored, overlapping locations), and the checks a pipeline needs just before it starts;
- `where`: the file and key path every error names, and the typed readers;
- `model`: LakehouseConfig and PipelineSpec.

The reference of every key is docs/configuration.md.
"""

from __future__ import annotations

from ingest.config.checks import assert_pipeline_ready
from ingest.config.loader import DEFAULT_CONFIG, load_config, parse_config
from ingest.config.model import LakehouseConfig, PipelineSpec

__all__ = [
    "DEFAULT_CONFIG",
    "LakehouseConfig",
    "PipelineSpec",
    "assert_pipeline_ready",
    "load_config",
    "parse_config",
]
