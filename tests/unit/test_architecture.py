"""The layering of advisor/, read from its own imports with `ast` (issue 19, "physics below, choosing above").

Every import counts, at module level and inside functions alike: an import inside a function still
ties two modules together, it only hides the knot until run time. Two kinds are not edges:
imports under `if TYPE_CHECKING:` (annotations only, never executed) and the imports of a PEP 562
module `__getattr__` (a deliberate lazy facade of a package over one of its modules, as
advisor.scaling's `build_model`).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "advisor"

#: The calibration worker's path, the only modules allowed to import torch at module level: the
#: worker runs as its own process (`python -m advisor.calibrate.worker`, advisor.calibrate.launcher)
#: and builds the proxy model; no other module imports either, so core commands never load torch.
WORKER_PATH = {"advisor.calibrate.worker", "advisor.calibrate.proxy", "advisor.calibrate.parallelize"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.Module, package: str = "") -> list[tuple[str, tuple[str, ...], bool]]:
    """(module, names imported from it, at module level?) for every executed import in the tree;
    relative imports resolved against `package` (the package the module sits in)."""
    out: list[tuple[str, tuple[str, ...], bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for part in child.orelse:
                    visit(part, top)
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if top and child.name == "__getattr__":
                    continue  # a PEP 562 lazy facade
                visit(child, False)
            elif isinstance(child, ast.Import):
                out.extend((a.name, (), top) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - child.level + 1] if child.level else []
                target = ".".join([*base, *([child.module] if child.module else [])])
                out.append((target, tuple(a.name for a in child.names), top))
            else:
                visit(child, top and not isinstance(child, ast.ClassDef | ast.Lambda))

    visit(tree, True)
    return out


def graph(modules: dict[str, ast.Module]) -> dict[str, set[str]]:
    """advisor module -> the advisor modules it imports (`from a import b` is a.b when b is a module)."""
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, tree in modules.items():
        is_package = any(other.startswith(name + ".") for other in modules)
        for target, names, _ in imports(tree, name if is_package else name.rpartition(".")[0]):
            if not target.startswith("advisor"):
                continue
            edges[name] |= {f"{target}.{n}" if f"{target}.{n}" in modules else target for n in names} or {target}
        edges[name].discard(name)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


@pytest.fixture(scope="module")
def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_cycle_finder_finds_a_cycle_and_passes_a_tree():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_imports_inside_functions_count_and_type_checking_and_facades_do_not():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from advisor.a import A\n"
        "def f():\n    from advisor.b import g\n"
        "def __getattr__(name):\n    from advisor import c\n"
        "import torch\n"
    )
    assert imports(tree) == [("typing", ("TYPE_CHECKING",), True), ("advisor.b", ("g",), False), ("torch", (), True)]
    fake = {"advisor.a": tree, "advisor.b": ast.parse("def h():\n    import advisor.a\n")}
    assert cycles(graph(fake)) == [["advisor.a", "advisor.b"]]
    relative = {"advisor.p": ast.parse(""), "advisor.p.x": ast.parse("from . import y\n"),
                "advisor.p.y": ast.parse("from .x import f\n")}
    assert cycles(graph(relative)) == [["advisor.p.x", "advisor.p.y"]]


def test_no_import_cycle_in_advisor(modules):
    assert cycles(graph(modules)) == []


def test_topology_sits_below_the_model_the_prices_and_the_commands(modules):
    above = ("advisor.scaling", "advisor.planning", "advisor.cli", "advisor.calibrate")
    bad = {
        name: sorted(t for t in targets if t.startswith(above))
        for name, targets in graph(modules).items()
        if name.startswith("advisor.topology")
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_batch_arithmetic_imports_no_other_advisor_module_at_run_time(modules):
    assert graph(modules)["advisor.batch"] == set()


def test_only_the_calibration_worker_imports_torch_at_module_level(modules):
    heavy = sorted(
        name
        for name, tree in modules.items()
        if any(top and target.split(".")[0] == "torch" for target, _, top in imports(tree))
    )
    assert set(heavy) <= WORKER_PATH, heavy


def test_nothing_outside_the_worker_path_imports_it(modules):
    users = {name: targets & WORKER_PATH for name, targets in graph(modules).items() if name not in WORKER_PATH}
    assert {k: v for k, v in users.items() if v} == {}


#: Issue 19's bar: no function in advisor/ longer than this, its signature included, except the option
#: declarations of a typer command (counted from the line after its signature's closing `:`).
MAX_FUNCTION_LINES = 60


def _is_typer_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated `@app.command(...)` (or `@group.command`): its signature is the command's options."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr == "command":
            return True
    return False


def long_functions(tree: ast.Module, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """`name:line` -> length in lines for every function (methods and nested ones too) longer than `limit`;
    a typer command's length starts at its body, other functions' at `def`."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0].lineno if _is_typer_command(node) else node.lineno
            if node.end_lineno - first + 1 > limit:
                found[f"{node.name}:{node.lineno}"] = node.end_lineno - first + 1
    return found


def test_the_length_check_finds_a_long_function_and_spares_a_command_s_options():
    body = "".join(f"    x{i} = {i}\n" for i in range(58))
    long_def = "def f(\n    a,\n):\n" + body  # 3 signature lines + 58 = 61
    assert long_functions(ast.parse(long_def)) == {"f:1": 61}
    assert long_functions(ast.parse("class C:\n" + textwrap.indent(long_def, "    "))) == {"f:2": 61}  # a method
    options = "".join(f"    o{i}: int = typer.Option({i}),\n" for i in range(40))
    command = "@app.command('x')\ndef cmd(\n" + options + ") -> None:\n" + body
    assert long_functions(ast.parse(command)) == {}
    assert long_functions(ast.parse(command.replace("@app.command('x')\n", ""))) == {"cmd:1": 100}
    assert long_functions(ast.parse(command + "    y = 0\n    z = 0\n    w = 0\n")) == {"cmd:2": 61}


def test_no_function_in_advisor_is_longer_than_60_lines(modules):
    found = {f"{name}.{where}": n for name, tree in modules.items() for where, n in long_functions(tree).items()}
    assert found == {}, f"longer than {MAX_FUNCTION_LINES} lines (split them): {found}"
