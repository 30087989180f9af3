"""The house rules, checked: no import circles inside `planner/`, no function longer than
~120 lines (a literal table excepted), reports never import PuLP, the model never reads files."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "planner"
MAX_LINES = 120


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _imported(name: str, path: Path) -> set[str]:
    """The planner modules `name` imports anywhere (top level or inside functions)."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = name.split(".")[: len(name.split(".")) - node.level + int(is_pkg)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
    return {m for m in found if m in MODULES and m != name}


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each planner module's planner imports: parsed when a test first asks (at import it cost
    every xdist worker ~1.3 s of collection, also the worker that runs none of these tests)."""
    return {name: _imported(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    # Importing the root package (for ``__version__``) runs none of its function-level
    # imports (the library face loads its stages on first call), so it closes no circle.
    assert _cycles({a: deps - {"planner"} for a, deps in graph().items()}) == []


def test_reports_never_import_pulp_and_model_never_reads_files():
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        roots = {
            (a.name if isinstance(n, ast.Import) else (n.module or "")).split(".")[0]
            for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom)
            for a in (n.names if isinstance(n, ast.Import) else [n])
        }
        if name.startswith(("planner.reports", "planner.ui")) or name in (
            "planner.plan.data",
            "planner.verify",
        ):
            assert "pulp" not in roots, f"{name} imports pulp"
        if name == "planner.optimize.model":
            assert not {"yaml", "planner.base.yamlio"} & (roots | graph()[name]), name
            assert "open(" not in text, "the model builder must not read files"


def _is_literal_table(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose body (after its docstring) is one literal list/dict/tuple."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return | ast.Assign):
        return False
    value = body[0].value
    return isinstance(value, ast.List | ast.Dict | ast.Tuple)


def _long_functions() -> list[tuple[int, str]]:
    rows = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES and not _is_literal_table(node):
                    rows.append((n, f"{name}.{node.name}"))
    return sorted(rows, reverse=True)


def test_no_function_over_120_lines():
    assert _long_functions() == []


@pytest.mark.parametrize("module", sorted(n for n in MODULES if n.startswith("planner.cli.")))
def test_cli_modules_do_not_import_the_solver(module):
    """CLI modules parse, load, call the library and print; the solver lives in the library."""
    assert (
        not {"planner.optimize.model", "planner.optimize.solve", "planner.plan.extract"}
        & graph()[module]
    ), module


# The pipeline, left to right: a module may import its own stage and stages to its left only.
STAGES = (
    "base",  # errors, safe files, YAML with line numbers, units, tolerances
    "inputs",  # schema, catalogs, resolution, profiles, finance defaults, importers
    "physics",  # pure functions: training hours, serving capacity, money over time
    "optimize",  # candidates, the model, starts, bounds, the solve, why no plan
    "plan",  # the plan as data, read from a solved model, made from a problem
    "verify",  # the plan checked against the inputs, independently of the model
    "analysis",  # explanations, what-if sweeps, break-even, catalog comparison
    "reports",  # terminal, workbook, what-if workbook
    "ui",  # the local web page: plans, what-ifs and the frontier in a browser
    "cli",  # click commands
    "__main__",  # the console script
)
MAX_MODULE_LINES, MAX_CLASS_LINES = 800, 400


def _stage(module: str) -> int:
    """The stage index of a planner module; the package's own ``__init__`` (the library face)
    comes last, as it may reach any stage."""
    parts = module.split(".")
    if len(parts) == 1:
        return len(STAGES)
    return STAGES.index(parts[1])


def _backward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a stage to the right. Importing the root package itself is allowed: it holds
    the version and a lazy face (:func:`test_the_root_package_imports_nothing_on_load`)."""
    return sorted(
        f"{a} -> {b}"
        for a, deps in graph.items()
        for b in deps
        if b != "planner" and _stage(b) > _stage(a)
    )


def test_the_root_package_imports_nothing_on_load():
    """``import planner`` (done by every module, for ``__version__``) loads no stage: the
    library face imports on first use."""
    tree = ast.parse((PKG / "__init__.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all(not (getattr(n, "module", "") or "").startswith("planner") for n in top)
    assert all(not a.name.startswith("planner") for n in top for a in n.names)


def test_every_module_belongs_to_a_stage():
    for name in MODULES:
        _stage(name)  # raises ValueError on a package outside STAGES


def test_the_stage_check_finds_a_backward_import():
    graph = {"planner.optimize.model": {"planner.plan.data"}, "planner.plan.data": set()}
    assert _backward_imports(graph) == ["planner.optimize.model -> planner.plan.data"]
    assert _backward_imports({"planner.plan.data": {"planner.optimize.model"}}) == []


def test_stages_import_only_their_left():
    assert _backward_imports(graph()) == []


def _too_long() -> list[str]:
    out = []
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if (n := text.count("\n")) > MAX_MODULE_LINES:
            out.append(f"{name}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            n = node.end_lineno - node.lineno + 1 if isinstance(node, ast.ClassDef) else 0
            if n > MAX_CLASS_LINES:
                out.append(f"{name}.{node.name}: class of {n} lines")
    return sorted(out)


def test_no_module_over_800_lines_no_class_over_400():
    assert _too_long() == []
