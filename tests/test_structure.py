"""The house's shape, checked: no hidden state, no import cycle, short files and parameter lists.

- No module of the three packages keeps mutable state: a run's caches live in the objects it
  makes (`tables.delta.writer.TableWriter`, `ingest.runner`'s run), never in a module, so two
  runs in one process share nothing they did not pass. Constants are immutable (tuples,
  frozensets, read-only mappings).
- No import cycle, counting imports inside functions (they hid three); TYPE_CHECKING imports do
  not run and are left out.
- No package file over 400 lines (bench/ and crash_matrix/ too).
- An import inside a function only where the CLI defers a heavy import for start-up, each such
  place saying so in a comment on the line before.
- The functions of the run path take at most five parameters; options travel grouped.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import importlib
import inspect
import pkgutil
import threading
import types
import weakref
from pathlib import Path

import pytest

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tables", "quality", "ingest")
_MUTABLE = (
    dict,
    list,
    set,
    bytearray,
    collections.deque,
    weakref.WeakValueDictionary,
    weakref.WeakKeyDictionary,
    threading.local,
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Event,
)
#: Where a function may import: the CLI defers Spark and other heavy modules until a command
#: needs them (`lakehouse --help` starts in a blink), and a spark-submit script must fix its
#: path first.
_DEFERRING = ("ingest/cli/", "ingest/job.py", "quality/expectations.py")
#: State that is the process's by nature, with the reason: fault injection is armed for a whole
#: process by its environment, a seed means one sequence of rolls per process, and a signal is
#: delivered to the process, not to a run.
_PROCESS_WIDE = {
    "tables.faults._rolls": "one seeded sequence of fault rolls per process",
    "tables.faults._term_injected": "an injected SIGTERM, seen by the process's signal handler",
}


def _modules() -> list[types.ModuleType]:
    found = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if not info.name.endswith("__main__"):
                found.append(importlib.import_module(info.name))
    return found


def _sources(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (ROOT / root).rglob("*.py"))


def test_no_module_keeps_mutable_state() -> None:
    held = [
        f"{module.__name__}.{name} ({type(value).__name__})"
        for module in _modules()
        for name, value in vars(module).items()
        if not name.startswith("__")
        and isinstance(value, _MUTABLE)
        and f"{module.__name__}.{name}" not in _PROCESS_WIDE
    ]
    held += [
        f"{module.__name__}.{name} (an instance of {type(value).__name__})"
        for module in _modules()
        for name, value in vars(module).items()
        if not name.startswith("__")
        and type(value).__module__.split(".")[0] in PACKAGES
        and not inspect.isclass(value)
        and not callable(value)
        and not isinstance(value, frozenset | tuple)
        and not getattr(getattr(type(value), "__dataclass_params__", None), "frozen", False)
    ]
    assert held == []


def _imports(path: Path, module: str) -> set[str]:
    """The project modules `path` imports when run (inside functions too, not TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, typing_only = stack.pop()
        for child in ast.iter_child_nodes(node):
            guarded = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            stack.append((child, typing_only or (guarded and child in node.body)))
        if typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                base = module.rsplit(".", node.level)[0] + (f".{base}" if base else "")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycle_anywhere() -> None:
    paths = {_module_name(p): p for p in _sources(*PACKAGES)}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        targets = set()
        for imported in _imports(path, name):
            while imported and imported not in paths:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_no_package_file_is_over_400_lines() -> None:
    long = [
        f"{p.relative_to(ROOT)} ({n})"
        for p in _sources(*PACKAGES, "bench", "crash_matrix")
        if (n := p.read_text().count("\n")) > 400
    ]
    assert long == []


def test_a_function_imports_only_where_the_cli_defers_and_says_so() -> None:
    found = []
    for path in _sources(*PACKAGES):
        relative = path.relative_to(ROOT).as_posix()
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if not isinstance(inner, ast.Import | ast.ImportFrom):
                    continue
                before = lines[inner.lineno - 2].strip()
                commented = before.startswith("#") or any(
                    lines[n].strip().startswith("#")
                    for n in range(node.lineno, inner.lineno - 1)
                    if lines[n].strip().startswith("# Deferred")
                )
                if not relative.startswith(_DEFERRING) or not commented:
                    found.append(f"{relative}:{inner.lineno}")
    assert found == []


#: The run path: a batch from the stream to its commit, audit and outcomes.
RUN_PATH = (
    "ingest.runner",
    "ingest.stream_commit",
    "ingest.commit",
    "ingest.commit.prepare",
    "ingest.commit.merge",
    "ingest.commit.skip",
    "ingest.commit.upsert",
    "ingest.outcomes",
    "ingest.isolation",
    "quality.audit",
    "tables.delta.commits",
)


@pytest.mark.parametrize("module", RUN_PATH)
def test_the_run_path_takes_at_most_five_parameters(module: str) -> None:
    loaded = importlib.import_module(module)
    wide = []
    for name, value in vars(loaded).items():
        functions = [value]
        if inspect.isclass(value) and value.__module__ == module:
            # A dataclass's fields are options grouped in one value: its __init__ is not counted.
            functions = [
                f
                for n, f in inspect.getmembers(value, inspect.isfunction)
                if not (dataclasses.is_dataclass(value) and n == "__init__")
            ]
        for function in functions:
            if not inspect.isfunction(function) or function.__module__ != module:
                continue
            parameters = [p for p in inspect.signature(function).parameters if p != "self"]
            if len(parameters) > 5:
                wide.append(f"{name}.{function.__name__}: {len(parameters)}")
    assert wide == []


def test_the_slow_tiers_longest_modules_first_name_modules_that_exist() -> None:
    """A module renamed out of `LONGEST_FIRST` would quietly go back to the end of the tier."""
    assert [m for m in LONGEST_FIRST if not (ROOT / m).is_file()] == []
