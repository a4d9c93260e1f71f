"""What a query read: the number of files its scans opened, from Spark's own scan metrics.

Delta prunes files by the min/max statistics in its log before Spark's scan lists them, so a
scan's `numFiles` metric is the count after data skipping. Reading it from the executed plan of
the DataFrame an action ran on shows whether a check or a MERGE source touched a handful of files
or the whole table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def files_scanned(frame: DataFrame) -> int:
    """Files read by the last action run on `frame`, summed over all of its file scans."""
    plan = frame._jdf.queryExecution().executedPlan()
    return sum(_metric(node, "numFiles") for node in _plan_nodes(plan) if _is_file_scan(node))


def _plan_nodes(root: Any) -> Iterator[Any]:
    """Every node of a physical plan, looking through adaptive plans, query stages and reuse."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            stack.append(node.executedPlan())
            continue
        if name.endswith("QueryStageExec"):
            stack.append(node.plan())
            continue
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
        subqueries = node.subqueries()
        stack.extend(subqueries.apply(i) for i in range(subqueries.size()))


def _is_file_scan(node: Any) -> bool:
    return str(node.getClass().getSimpleName()) == "FileSourceScanExec"


def _metric(node: Any, name: str) -> int:
    found = node.metrics().get(name)
    return int(found.get().value()) if found.isDefined() else 0
