"""The layout's rules, read from the source with `ast`: no import cycle (imports inside functions and those made
only for type checks count), `echo_tools` imports neither `workflow_bridge` nor `AgentTools`, and every
module stays small (modules under 600 lines, functions under 80)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("echo_tools", "workflow_bridge", "AgentTools")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(tree: ast.Module, type_checking: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import a module runs, at load or inside a function; those under `if TYPE_CHECKING` too when
    `type_checking`."""

    def visit(nodes: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
            elif isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                yield from visit(node.body if type_checking else [])
                yield from visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        yield from visit([n for n in inner if isinstance(n, ast.stmt | ast.excepthandler)])  # type: ignore[misc]

    yield from visit(tree.body)


def _targets(name: str, path: Path, known: dict[str, Path], type_checking: bool = False) -> set[str]:
    """The modules of the two packages that `name` imports (for type checks too, when `type_checking`)."""
    targets = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8")), type_checking):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names if alias.name in known)
            continue
        if node.level:
            base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        for alias in node.names:
            submodule = f"{module}.{alias.name}"
            targets.add(submodule if submodule in known else module)
    return {target for target in targets if target in known and target != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_one_that_imports_it_back_counting_imports_inside_functions() -> None:
    known = _modules()
    graph = {name: _targets(name, path, known) for name, path in known.items()}
    assert sum(len(targets) for targets in graph.values()) > 400  # the walk found those inside functions too
    assert _cycles(graph) == []


def test_no_module_is_in_an_import_cycle_even_counting_imports_for_type_checks() -> None:
    known = _modules()
    graph = {name: _targets(name, path, known, type_checking=True) for name, path in known.items()}
    assert sum(len(targets) for targets in graph.values()) > sum(
        len(_targets(name, path, known)) for name, path in known.items()
    )  # the imports for type checks were counted
    assert _cycles(graph) == []


def test_imports_for_type_checks_count_only_when_asked() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nelse:\n    import b\n"
    )
    assert [alias.name for node in _imports(tree) for alias in node.names] == ["TYPE_CHECKING", "b"]
    assert [alias.name for node in _imports(tree, type_checking=True) for alias in node.names] == [
        "TYPE_CHECKING",
        "a",
        "b",
    ]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def absolute_imports(package: Path) -> Iterator[tuple[str, str]]:
    """(`path:line`, module) of every absolute import in the package's modules, type-checking ones too."""
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            yield from ((f"{path.relative_to(ROOT)}:{node.lineno}", name) for name in names)


def test_echo_tools_imports_neither_the_bridge_nor_the_shipped_tools() -> None:
    offenders = [
        f"{where} imports {name}"
        for where, name in absolute_imports(ROOT / "echo_tools")
        if name.split(".")[0] in ("workflow_bridge", "AgentTools")
    ]
    assert offenders == []


def oversized(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Modules over `MAX_MODULE_LINES` lines and functions over `MAX_FUNCTION_LINES`, as readable lines."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root)
        if text.count("\n") > MAX_MODULE_LINES:
            found.append(f"{where}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{where}:{node.lineno} {node.name}() {length} lines")
    return found


def test_every_module_and_function_stays_small() -> None:
    paths = sorted(_modules().values())
    assert len(paths) > 200  # every module of echo_tools, workflow_bridge and AgentTools
    assert oversized(paths) == []


def test_the_size_check_names_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES + "\n" * MAX_MODULE_LINES)
    assert oversized([long], root=tmp_path) == [
        f"long.py: {MAX_FUNCTION_LINES + MAX_MODULE_LINES + 1} lines",
        f"long.py:1 f() {MAX_FUNCTION_LINES + 1} lines",
    ]


def test_the_bridge_uses_the_cli_through_its_public_names_only() -> None:
    """`workflow_bridge` imports `echo_tools.cli` (its `__all__`) and `echo_tools.console`, never a module
    inside the CLI (`echo_tools.cli.common`, `.catalogue`, `.output`, `.main`, ...)."""
    offenders = [
        f"{where} imports {name}"
        for where, name in absolute_imports(ROOT / "workflow_bridge")
        if name.startswith("echo_tools.cli.")
    ]
    assert offenders == []
