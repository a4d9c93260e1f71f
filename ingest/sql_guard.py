"""Whether a `lakehouse sql` statement only reads, decided on the facts of Spark's own plans.

`lakehouse sql` sits next to the analyst commands, so by default it runs only statements whose
plan reads: queries (with CTEs, subqueries, views), SHOW, DESCRIBE and EXPLAIN. Everything else is
refused before Spark runs it, in one line that says what was found: a write, DDL, a session
setting, an added JAR or file, a function that reaches the JVM or reads files, a command, or a
path relation outside the lakehouse's warehouse directory. The decision is deny-by-default: a
plan node is accepted only if it is a Catalyst query operator (not a command) or one of the
read-only commands listed here, so a command Spark or Delta adds later is refused until it is
listed. Operators pass `--allow-writes` (after a confirmation) to run anything.

The facts come from `tables.plans`, the one module that reads plans through the JVM; this module
decides without Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tables.errors import ReadOnlyStatementError

if TYPE_CHECKING:
    from tables.plans import PlanFacts, PlanNode

#: Catalyst's packages of query operators and of the unresolved nodes the parser emits.
QUERY_PACKAGES = frozenset(
    {"org.apache.spark.sql.catalyst.plans.logical", "org.apache.spark.sql.catalyst.analysis"}
)
#: Commands that only read metadata or describe a plan (their parsed and analysed class names).
READ_COMMANDS = frozenset(
    {
        "ShowTables",
        "ShowTablesExtended",
        "ShowTableExtended",
        "ShowViews",
        "ShowNamespaces",
        "ShowColumns",
        "ShowFunctions",
        "ShowTableProperties",
        "ShowPartitions",
        "ShowCreateTable",
        "ShowCatalogs",
        "ShowCurrentNamespace",
        "DescribeRelation",
        "DescribeColumn",
        "DescribeNamespace",
        "DescribeFunction",
        "DescribeQueryCommand",
        "DescribeDeltaHistory",
        "DescribeDeltaDetail",
        "ExplainCommand",
        # the same, as Spark's v1 commands and Delta's own
        "ShowTablesCommand",
        "ShowViewsCommand",
        "ShowNamespacesCommand",
        "ShowColumnsCommand",
        "ShowDeltaTableColumnsCommand",
        "ShowFunctionsCommand",
        "ShowTablePropertiesCommand",
        "ShowPartitionsCommand",
        "ShowCreateTableCommand",
        "ShowCatalogsCommand",
        "ShowCurrentNamespaceCommand",
        "DescribeTableCommand",
        "DescribeColumnCommand",
        "DescribeDatabaseCommand",
        "DescribeFunctionCommand",
        "DescribeDeltaHistoryCommand",
        "DescribeDeltaDetailCommand",
    }
)
#: Parsed nodes that are not commands to Catalyst but write.
WRITE_NODES = frozenset({"InsertIntoStatement", "InsertIntoDir"})
_WRITE_PREFIXES = (
    "Insert",
    "Delete",
    "Update",
    "Merge",
    "Truncate",
    "Append",
    "Overwrite",
    "ReplaceData",
    "WriteDelta",
    "Optimize",
    "Vacuum",
    "Restore",
    "Clone",
    "Convert",
    "Repair",
    "Analyze",
    "Cache",
    "Uncache",
    "ClearCache",
    "Refresh",
)
_DDL_PREFIXES = ("Create", "Drop", "Alter", "Rename", "Replace", "Comment", "Unset", "AddColumns")
_SETTINGS = frozenset(
    {"SetCommand", "ResetCommand", "SetCatalogAndNamespace", "SetVariable", "SetNamespaceCommand"}
)
_ADDS = frozenset({"AddJarsCommand", "AddFilesCommand", "AddArchivesCommand"})
#: Functions that call JVM methods by name, or read files named in their arguments.
JVM_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect", "from_protobuf", "to_protobuf"})
#: Their analysed expression classes (a view's text is only seen analysed).
JVM_EXPRESSIONS = frozenset(
    {"CallMethodViaReflection", "TryReflect", "ProtobufDataToCatalyst", "CatalystDataToProtobuf"}
)
ALLOW_WRITES_HINT = "operators can pass --allow-writes"


def node_refusal(node: PlanNode) -> str | None:
    """Why a plan node does not only read, or None if it does."""
    name = node.name
    if name in READ_COMMANDS:
        return None
    if name in _ADDS:
        return f"ADD JAR/FILE ({name}) is refused"
    if name in _SETTINGS:
        return f"SET/RESET/USE changes the session ({name}) and is refused"
    if name == "CreateFunction" or name.endswith("FunctionCommand"):
        return f"CREATE/DROP FUNCTION ({name}) is DDL and is refused"
    if name in WRITE_NODES or name.startswith(_WRITE_PREFIXES):
        return f"{name} writes and is refused"
    if name.startswith(_DDL_PREFIXES) or "Properties" in name:
        return f"{name} is DDL and is refused"
    if node.command or node.package not in QUERY_PACKAGES:
        return f"{name} is a command, not a read, and is refused"
    return None


def is_inside(path: str, root: str) -> bool:
    """True if a qualified path is `root` or below it (both qualified, normalised URIs)."""
    base = root.rstrip("/")
    return path == base or path.startswith(base + "/")


def refusal(facts: PlanFacts, root: str, *, nodes: bool = True) -> str | None:
    """The first reason the plan is not read-only under warehouse `root`, or None.

    The node rule applies to the parsed plan; an analysed plan (`nodes=False`) holds the
    relations and commands Spark resolved the parsed nodes into, checked for what they call and
    read only.
    """
    for node in facts.nodes if nodes else ():
        reason = node_refusal(node)
        if reason is not None:
            return reason
    called = sorted({f for f in facts.functions if f in JVM_FUNCTIONS})
    reached = sorted({e for e in facts.expressions if e in JVM_EXPRESSIONS})
    if called or reached:
        return f"{(called or reached)[0]} reaches the JVM or reads files and is refused"
    outside = [p for p in facts.paths if not is_inside(p, root)]
    if outside:
        return f"the path relation {outside[0]} is outside the lakehouse home {root} and is refused"
    if facts.unnamed_sources:
        return f"a {facts.unnamed_sources[0]} source outside the catalog is refused"
    return None


def assert_read_only(facts: PlanFacts, root: str, *, nodes: bool = True) -> None:
    """Raise ReadOnlyStatementError, one line, unless the plan only reads."""
    reason = refusal(facts, root, nodes=nodes)
    if reason is not None:
        raise ReadOnlyStatementError(
            f"`lakehouse sql` is read-only: {reason} ({ALLOW_WRITES_HINT})"
        )
