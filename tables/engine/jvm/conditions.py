"""Spark's error conditions: how the packages tell one Spark failure from another.

Spark 4 exceptions carry an error condition (`PATH_NOT_FOUND`, `DELTA_MISSING_DELTA_TABLE`, ...)
over classic and Connect sessions alike; a Spark release may reword a message, not a condition.
The packages ask this module and never match an error's text.
"""

from __future__ import annotations

#: How far `error_condition` follows an exception's causes.
_CAUSE_DEPTH = 8


def error_condition(exc: BaseException) -> str | None:
    """Spark's error condition (`PATH_NOT_FOUND`, `DELTA_MISSING_DELTA_TABLE`, ...) of `exc` or
    of the first exception it was raised from that has one; None if none has.

    PySpark's exceptions carry the condition for classic and Connect sessions alike, so a caller
    tells failures apart by class, never by matching a message that a Spark release may reword.
    """
    seen: BaseException | None = exc
    for _ in range(_CAUSE_DEPTH):
        if seen is None:
            return None
        condition = getattr(seen, "getCondition", None)
        found = condition() if callable(condition) else None
        if isinstance(found, str) and found:
            return found
        seen = seen.__cause__ or seen.__context__
    return None


def has_condition(exc: BaseException, *conditions: str) -> bool:
    """True if `exc`'s Spark error condition is one of `conditions` or a sub-condition of one."""
    found = error_condition(exc)
    return found is not None and any(
        found == wanted or found.startswith(f"{wanted}.") for wanted in conditions
    )


def java_class_names(exc: BaseException) -> set[str]:
    """The class names of the Java exception behind a classic session's error and of its causes
    (empty for any other error): a class with no error condition, such as the log store's
    `lakehouse.CommitNotWrittenException`, is told apart by them."""
    names: set[str] = set()
    # A Py4JJavaError holds its Java exception; PySpark's own exceptions keep theirs as _origin.
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    for _ in range(_CAUSE_DEPTH):
        if java is None:
            break
        try:
            names.add(str(java.getClass().getName()))
            java = java.getCause()
        except Exception:  # a JVM gone: what was read so far
            break
    return names
