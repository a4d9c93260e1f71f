"""The JVM boundary for plan inspection: what a SQL statement would do, read from Spark's plans.

`lakehouse sql` decides whether a statement only reads on Spark's own plans, never on regexes
over the text. PySpark has no public API for a parsed plan that is not executed (`spark.sql`
runs commands at once), so this module, and only this one, reaches into the session's SQL
parser (`sessionState().sqlParser().parsePlan`) and a DataFrame's analysed plan through py4j. It
turns both into plain facts (node classes, called functions, named relations, file paths read);
`ingest.sql_guard` decides on those facts without Spark.

Every node is visited: the plan's children, its inner children (a WITH clause's definitions),
and the plans inside its expressions (scalar, IN and EXISTS subqueries). A view is expanded in
the analysed plan, so its own text is checked too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tables.errors import QueryError, error_summary
from tables.session import hadoop_path, jvm_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Data source names Spark accepts in `format.`path`` relations (besides class names).
FILE_SOURCES = frozenset(
    {"text", "json", "csv", "parquet", "orc", "avro", "delta", "binaryfile", "xml", "hive"}
)
_COMMAND = "org.apache.spark.sql.catalyst.plans.logical.Command"
_STATEMENT = "org.apache.spark.sql.catalyst.plans.logical.ParsedStatement"
_SUBQUERY = "org.apache.spark.sql.catalyst.expressions.SubqueryExpression"
_FILES = "org.apache.spark.sql.execution.datasources.HadoopFsRelation"
#: Commands that hold the statement they describe in a field, not as a child.
_WRAPPED = {"ExplainCommand": "logicalPlan", "DescribeQueryCommand": "plan"}
_RELATIONS = {
    "UnresolvedRelation": "multipartIdentifier",
    "UnresolvedTable": "multipartIdentifier",
    "UnresolvedTableOrView": "multipartIdentifier",
    "UnresolvedView": "multipartIdentifier",
    "UnresolvedIdentifier": "nameParts",
}


@dataclass(frozen=True)
class PlanNode:
    """One node of a plan: its class and whether Spark runs it as a command."""

    name: str
    package: str
    command: bool


@dataclass
class PlanFacts:
    """What a plan holds, as plain values: nodes, functions called, relations and paths read."""

    nodes: list[PlanNode] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    expressions: list[str] = field(default_factory=list)
    relations: list[tuple[str, ...]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    unnamed_sources: list[str] = field(default_factory=list)


def parsed_facts(spark: SparkSession, text: str) -> PlanFacts:
    """Parse one statement without running it and collect its facts; a parse error is one line.

    A relation named `format.`path`` (Spark's SQL on files) has its path qualified into `paths`.
    """
    jspark = spark._jsparkSession
    try:
        plan = jspark.sessionState().sqlParser().parsePlan(text)
    except Exception as exc:
        raise QueryError(f"SQL failed: {error_summary(exc)}") from exc
    walker = _Walker(jvm_of(spark))
    walker.plan(plan)
    facts = walker.facts
    facts.paths = [qualified(spark, p[1]) for p in facts.relations if is_path_relation(p)]
    return facts


def is_path_relation(parts: tuple[str, ...]) -> bool:
    """True for a relation Spark reads as files: `format.`path`` with a data source format."""
    if len(parts) != 2:
        return False
    source, location = parts
    return source.lower() in FILE_SOURCES or "." in source or "/" in location or ":" in location


def warehouse(spark: SparkSession) -> str:
    """The session's warehouse directory, qualified: the only place path relations may read."""
    return qualified(spark, str(spark.conf.get("spark.sql.warehouse.dir")))


def analysed_facts(frame: DataFrame) -> PlanFacts:
    """Collect the facts of a DataFrame's analysed plan (views expanded), without running it."""
    spark = frame.sparkSession
    walker = _Walker(jvm_of(spark))
    walker.plan(frame._jdf.queryExecution().analyzed())
    facts = walker.facts
    facts.paths = [qualified(spark, p) for p in facts.paths]
    return facts


def qualified(spark: SparkSession, location: str) -> str:
    """A location as a fully qualified, normalised URI (`file:/a/b`), for prefix checks."""
    fs, path = hadoop_path(spark, location)
    return str(fs.makeQualified(path).toUri().normalize().toString())


class _Walker:
    def __init__(self, jvm: Any) -> None:
        self.facts = PlanFacts()
        self._class = jvm.java.lang.Class
        self._command = self._class.forName(_COMMAND)
        self._statement = self._class.forName(_STATEMENT)
        self._subquery = self._class.forName(_SUBQUERY)
        self._files = self._class.forName(_FILES)

    def plan(self, node: Any) -> None:
        cls = node.getClass()
        name = str(cls.getSimpleName())
        package = str(cls.getPackage().getName()) if cls.getPackage() is not None else ""
        command = bool(self._command.isInstance(node) or self._statement.isInstance(node))
        self.facts.nodes.append(PlanNode(name, package, command))
        if name in _RELATIONS:
            parts = getattr(node, _RELATIONS[name])()
            self.facts.relations.append(tuple(str(parts.apply(i)) for i in range(parts.size())))
        if name in _WRAPPED:
            self.plan(getattr(node, _WRAPPED[name])())
        if name == "LogicalRelation":
            self._logical_relation(node)
        elif name in ("DataSourceV2Relation", "DataSourceV2ScanRelation"):
            self._v2_relation(node)
        for expression in _seq(node.expressions()):
            self.expression(expression)
        for child in _seq(node.children()):
            self.plan(child)
        for inner in _seq(node.innerChildren()):
            if self._is_plan(inner):
                self.plan(inner)

    def expression(self, node: Any) -> None:
        name = str(node.getClass().getSimpleName())
        self.facts.expressions.append(name)
        if name == "UnresolvedFunction":
            parts = node.nameParts()
            self.facts.functions.append(str(parts.apply(parts.size() - 1)).lower())
        if self._subquery.isInstance(node):
            self.plan(node.plan())
        for child in _seq(node.children()):
            self.expression(child)

    def _is_plan(self, value: Any) -> bool:
        try:
            return bool(value.getClass().getName().startswith("org.apache.spark.sql")) and hasattr(
                value, "children"
            )
        except Exception:
            return False

    def _logical_relation(self, node: Any) -> None:
        if node.catalogTable().isDefined():
            return
        relation = node.relation()
        if self._files.isInstance(relation):
            roots = _seq(relation.location().rootPaths())
            self.facts.paths.extend(str(p.toString()) for p in roots)
        else:
            kind = str(relation.getClass().getName())
            self.facts.unnamed_sources.append(kind)

    def _v2_relation(self, node: Any) -> None:
        location = _v2_path(node.table())
        named = node.catalog().isDefined() and node.identifier().isDefined()
        if named and not _is_path_identifier(node.identifier().get()):
            return
        if location is not None:
            self.facts.paths.append(location)
            return
        kind = str(node.table().getClass().getSimpleName()) or "data source"
        self.facts.unnamed_sources.append(kind)


def _v2_path(table: Any) -> str | None:
    try:
        return str(table.path().toString())
    except Exception:
        return None


def _is_path_identifier(identifier: Any) -> bool:
    """True for Delta's path identifiers (`delta.`/path``), whose name is an absolute path."""
    return str(identifier.name()).startswith("/") or ":" in str(identifier.name())


def _seq(value: Any) -> list[Any]:
    """A Scala Seq (or Java collection) as a Python list."""
    if hasattr(value, "size") and hasattr(value, "apply"):
        return [value.apply(i) for i in range(value.size())]
    if hasattr(value, "iterator"):
        iterator = value.iterator()
        items = []
        while iterator.hasNext():
            items.append(iterator.next())
        return items
    return list(value)
