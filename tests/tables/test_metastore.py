"""The metastore model read from the metastore JAR's package.jdo, and when a schema is whole."""

from __future__ import annotations

import zipfile

import pytest

from tables.engine.metastore import SEQUENCE_TABLE, MetastoreModel
from tables.errors import SessionError
from tests.support.servers import SPARK_HOME


def hive_package_jdo() -> bytes:
    (jar,) = (SPARK_HOME / "jars").glob("hive-metastore-*.jar")
    with zipfile.ZipFile(jar) as archive:
        return archive.read("package.jdo")


def test_the_model_of_the_bundled_metastore() -> None:
    model = MetastoreModel.parse(hive_package_jdo())
    assert "org.apache.hadoop.hive.metastore.model.MTable" in model.classes
    assert {"DBS", "TBLS", "SDS", "TABLE_PARAMS", "SKEWED_STRING_LIST"} <= model.tables
    # Embedded-only classes live in their owner's tables.
    assert "SORT_ORDER" not in model.tables
    assert "RESOURCE_URI" not in model.tables


def test_a_schema_is_whole_with_every_table_the_counters_and_default() -> None:
    model = MetastoreModel.parse(
        b"""<jdo><package name="p">
        <class name="MA" table="A"><field name="x" table="A_X"/></class>
        <class name="MB" table="B" embedded-only="true"/>
        </package></jdo>"""
    )
    assert model.classes == ("p.MA", "p.MB")
    assert model.tables == {"A", "A_X"}
    whole = {"A", "A_X", SEQUENCE_TABLE}
    assert model.is_complete(whole, has_default_database=True)
    assert not model.is_complete(whole, has_default_database=False)
    assert not model.is_complete(whole - {"A_X"}, has_default_database=True)
    assert not model.is_complete(whole - {SEQUENCE_TABLE}, has_default_database=True)


def test_a_model_without_classes_is_refused() -> None:
    with pytest.raises(SessionError, match="no persistent classes"):
        MetastoreModel.parse(b"<jdo/>")
