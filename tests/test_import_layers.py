"""The import structure of dvengine, checked statically with ``ast`` (nothing is imported).

(a) Only ``dvengine.engine.spark`` (and the benchmark harness ``dvengine.bench``) import pyspark;
    everything else may name pyspark types only under ``if TYPE_CHECKING:``.
(b) ``dvengine.engine.spark`` is reached from outside the engine only lazily (inside a function)
    and only from the user-facing modules that dispatch to it.
(c) Modules import only from their own layer or lower ones (upward imports under TYPE_CHECKING
    are allowed). The layers, bottom to top, are those of ``LAYERS``.
(d) No import circles: among the imports made at run time (module level or inside a function; not
    those under TYPE_CHECKING), no module reaches itself again. A lazy import does not excuse a circle.
(e) The package root holds subpackages plus ``__init__``, ``errors`` and ``faults`` only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "dvengine"

# Bottom to top. A module belongs to the layer of its longest matching prefix. README's "How it is
# built" lists the same floors for readers.
LAYERS: list[tuple[str, ...]] = [
    ("dvengine.errors", "dvengine.faults"),
    # every byte in and out of a table (local folders, object stores) and the table-name catalog
    # file; below the DV codec, whose file reads and writes go through it
    ("dvengine.storage",),
    ("dvengine.protocol",),
    ("dvengine.dv",),
    ("dvengine.expressions",),
    ("dvengine.log",),
    ("dvengine.planning",),
    ("dvengine.commit",),
    ("dvengine.writing",),
    ("dvengine.read",),
    ("dvengine.changes",),  # change data feed reader: log + read, below the commands
    # maintenance (VACUUM, history) sits with the commands, not at the top beside the CLI: it needs
    # only log, storage and dv, and DeltaTable.history()/vacuum() delegate to it.
    ("dvengine.commands", "dvengine.maintenance"),
    ("dvengine.engine",),  # engine.local and engine.spark
    # the user API: builders and DML entry points below DeltaTable, which hands them out
    ("dvengine.api.dml", "dvengine.api.maintenance", "dvengine.api.table_support", "dvengine.api.merge_builder",
     "dvengine.api.optimize_builder", "dvengine.api.table_builder"),
    ("dvengine.api",),  # dvengine.api.table (DeltaTable) and the package docstring
    # "dvengine" is the package __init__; dvengine.sqlcmd (dvengine.sql()) is user API over DeltaTable
    ("dvengine", "dvengine.sqlcmd"),
    ("dvengine.cli", "dvengine.bench", "dvengine.testing"),
]

# Upward imports that exist on purpose, each with its reason: (importer, imported module).
# Keep this list short and explained; a new entry is an architectural decision, not a test fix.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

# Modules outside dvengine.engine.spark that may import pyspark outside TYPE_CHECKING.
PYSPARK_ALLOWED_PREFIXES = ("dvengine.engine.spark", "dvengine.bench")

# Single pyspark imports allowed elsewhere, each with its reason: (importer, imported module).
PYSPARK_ALLOWED_IMPORTS: dict[tuple[str, str], str] = {
    # dvengine.errors.AnalysisError subclasses pyspark's AnalysisException when pyspark is installed,
    # so delta-spark scripts' `except AnalysisException` keeps catching "not a Delta table" and friends.
    # A class's bases are fixed when it is made, so the import must be where the class is; the import
    # is guarded (ImportError: a stand-in base) and pyspark.errors is pure Python (no JVM, no gateway).
    ("dvengine.errors", "pyspark.errors"): "typed errors that are also pyspark's AnalysisException",
}

# Modules outside dvengine.engine.spark that may import dvengine.engine.spark, and only lazily
# (inside a function body), so that importing them starts no JVM and needs no pyspark.
SPARK_ENGINE_LAZY_IMPORTERS = (
    "dvengine",
    "dvengine.api",
    "dvengine.testing",
    "dvengine.cli",
    "dvengine.bench",
    "dvengine.sqlcmd",
)


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # dotted module name (best resolution: submodule when the imported name is one)
    line: int
    type_checking: bool
    in_function: bool


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE_ROOT.rglob("*.py"))}


MODULES = all_modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, type_checking: bool, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True, in_function)
            for child in node.orelse:
                visit(child, type_checking, in_function)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(name, alias.name, node.lineno, type_checking, in_function))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(name, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in MODULES else base
                found.append(Import(name, target, node.lineno, type_checking, in_function))
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, type_checking, inner)

    visit(tree, False, False)
    return found


ALL_IMPORTS = [imp for name, path in MODULES.items() for imp in imports_of(name, path)]


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str) -> int:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            # the bare package "dvengine" matches only itself, not every module
            matches = name == prefix if prefix == "dvengine" else _within(name, prefix)
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    if best is None:
        raise AssertionError(f"module {name} belongs to no layer: add it to LAYERS")
    return best[1]


# --- the checker itself ------------------------------------------------------------------------


def test_the_parser_sees_the_imports_it_must_judge() -> None:
    """Guards against a checker that passes because it finds nothing."""
    assert len(MODULES) > 80
    by_importer = {(i.importer, i.target) for i in ALL_IMPORTS}
    assert ("dvengine.engine.local.executor", "dvengine.commands.context") in by_importer
    table_spark = [i for i in ALL_IMPORTS if i.importer == "dvengine.api.table" and i.target.startswith("pyspark")]
    assert table_spark and all(i.type_checking for i in table_spark)
    lazy = [i for i in ALL_IMPORTS if i.importer == "dvengine.api.table" and i.target == "dvengine.engine.spark.reader"]
    assert lazy and all(i.in_function and not i.type_checking for i in lazy)


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        layer_of(name)


def test_the_checker_flags_an_upward_import(tmp_path: Path) -> None:
    """Self-test on synthetic source: an upward import is found, one under TYPE_CHECKING is not."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from dvengine.log import Snapshot\n"
        "import pyspark.sql\n"
        "if TYPE_CHECKING:\n"
        "    from dvengine.api.table import DeltaTable\n"
        "def f():\n"
        "    from dvengine.engine.spark import reader\n"
    )
    fake = PACKAGE_ROOT / "protocol" / "fake.py"  # only its name is used; the text is parsed from tmp
    path = tmp_path / "fake.py"
    path.write_text(source)
    found = imports_of(module_name(fake), path)
    upward = [
        i for i in found
        if _within(i.target, "dvengine") and not i.type_checking and layer_of(i.target) > layer_of(i.importer)
    ]
    assert {i.target for i in upward} == {"dvengine.log", "dvengine.engine.spark.reader"}
    assert [i.target for i in found if i.target.startswith("pyspark") and not i.type_checking] == ["pyspark.sql"]


# --- the rules ---------------------------------------------------------------------------------


def test_only_the_spark_engine_imports_pyspark() -> None:
    offenders = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in ALL_IMPORTS
        if _within(i.target, "pyspark") or _within(i.target, "py4j") or _within(i.target, "delta")
        if not i.type_checking
        if not any(_within(i.importer, p) for p in PYSPARK_ALLOWED_PREFIXES)
        if (i.importer, i.target) not in PYSPARK_ALLOWED_IMPORTS
    ]
    assert offenders == []


@pytest.mark.parametrize("pair", sorted(PYSPARK_ALLOWED_IMPORTS))
def test_the_pyspark_allow_list_holds_no_stale_entries(pair: tuple[str, str]) -> None:
    assert pair in {(i.importer, i.target) for i in ALL_IMPORTS if not i.type_checking}


def test_the_spark_engine_is_imported_lazily_and_only_from_the_dispatching_modules() -> None:
    offenders = []
    for i in ALL_IMPORTS:
        if not _within(i.target, "dvengine.engine.spark") or _within(i.importer, "dvengine.engine.spark"):
            continue
        if i.type_checking:
            continue
        allowed = any(
            i.importer == p or (p != "dvengine" and _within(i.importer, p)) for p in SPARK_ENGINE_LAZY_IMPORTERS
        )
        if not allowed:
            offenders.append(f"{i.importer}:{i.line} imports {i.target} (not a dispatching module)")
        elif not i.in_function and not _within(i.importer, "dvengine.bench"):
            offenders.append(f"{i.importer}:{i.line} imports {i.target} at module level (must be lazy)")
    assert offenders == []


def test_the_local_engine_does_not_depend_on_the_spark_engine() -> None:
    offenders = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in ALL_IMPORTS
        if _within(i.importer, "dvengine.engine.local") and _within(i.target, "dvengine.engine.spark")
    ]
    assert offenders == []


def _layer_violations() -> list[tuple[str, str, str]]:
    out = []
    for i in ALL_IMPORTS:
        if not _within(i.target, "dvengine") or i.type_checking:
            continue
        if i.target not in MODULES:
            raise AssertionError(f"{i.importer}:{i.line} imports {i.target}, which is not a dvengine module")
        low, high = layer_of(i.importer), layer_of(i.target)
        if high > low:
            out.append((i.importer, i.target, f"{i.importer}:{i.line} (layer {low}) imports {i.target} (layer {high})"))
    return out


def test_modules_import_only_their_own_layer_or_lower_ones() -> None:
    violations = [text for importer, target, text in _layer_violations() if (importer, target) not in ALLOWED_UPWARD]
    assert violations == [], "upward imports:\n" + "\n".join(violations)


@pytest.mark.parametrize("pair", sorted(ALLOWED_UPWARD) or [None])
def test_the_allow_list_holds_no_stale_entries(pair: tuple[str, str] | None) -> None:
    if pair is None:
        return
    assert pair in {(a, b) for a, b, _ in _layer_violations()}, f"{pair} is allowed but no longer imported upward"


# --- (d) circles ---------------------------------------------------------------------------------


def import_cycles(imports: Iterable[Import]) -> list[list[str]]:
    """The strongly connected groups of two or more dvengine modules (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        if i.type_checking or not _within(i.target, "dvengine") or i.target == i.importer:
            continue
        graph.setdefault(i.importer, set()).add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(groups)


def test_there_are_no_import_cycles() -> None:
    assert import_cycles(ALL_IMPORTS) == []


def test_the_checker_flags_a_cycle_even_through_a_lazy_import(tmp_path: Path) -> None:
    """Self-test: two real modules made to import each other (one lazily) form a reported circle,
    while the same edge under TYPE_CHECKING does not."""
    planted = tmp_path / "candidates.py"
    planted.write_text(
        (PACKAGE_ROOT / "planning" / "candidates.py").read_text()
        + "\n\ndef _planted():\n    from dvengine.api.table import DeltaTable\n    return DeltaTable\n"
    )
    planted_imports = imports_of("dvengine.planning.candidates", planted)
    others = [i for i in ALL_IMPORTS if i.importer != "dvengine.planning.candidates"]
    cycles = import_cycles(others + planted_imports)
    assert any({"dvengine.planning.candidates", "dvengine.api.table"} <= set(group) for group in cycles), cycles

    guarded = tmp_path / "guarded.py"
    guarded.write_text(
        (PACKAGE_ROOT / "planning" / "candidates.py").read_text()
        + "\n\nif TYPE_CHECKING:\n    from dvengine.api.table import DeltaTable\n"
    )
    guarded_imports = imports_of("dvengine.planning.candidates", guarded)
    assert import_cycles(others + guarded_imports) == []


def test_the_checker_flags_a_planted_upward_import_in_a_real_module(tmp_path: Path) -> None:
    """Self-test on a real module: planting ``from dvengine.commands import delete`` in the DV codec
    (layer dv, below commands) is reported by the layer rule."""
    planted = tmp_path / "bitmap.py"
    planted.write_text((PACKAGE_ROOT / "dv" / "bitmap.py").read_text() + "\nfrom dvengine.commands import delete\n")
    found = imports_of("dvengine.dv.bitmap", planted)
    upward = [i for i in found if _within(i.target, "dvengine") and layer_of(i.target) > layer_of(i.importer)]
    assert [i.target for i in upward] == ["dvengine.commands.delete"]


# --- (e) the package root ------------------------------------------------------------------------

ROOT_MODULES = {"__init__.py", "errors.py", "faults.py"}


def test_the_package_root_holds_only_subpackages_and_the_shared_modules() -> None:
    loose = sorted(p.name for p in PACKAGE_ROOT.glob("*.py") if p.name not in ROOT_MODULES)
    assert loose == []
    for folder in (p for p in PACKAGE_ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").exists(), f"{folder.name} is a folder but not a package"
