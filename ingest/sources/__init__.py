"""Where a pipeline's rows come from: landing directories of files, and Kafka topics.

Each source satisfies `Source` (`ingest.sources.protocol`): the runner, replay, the config
checks and the CLI use that protocol and never branch on the source's type.
"""

from ingest.sources.files import FileSource
from ingest.sources.kafka import KafkaSource
from ingest.sources.protocol import Source, recorded_source

__all__ = ["FileSource", "KafkaSource", "Source", "recorded_source"]
