"""The shape of the package (issue 19): no import cycle, small modules, services that do not
inherit from each other, and faces (CLI) that see only the Manager and the contract."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "backendmgr"
MAX_LINES = 500


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The modules a ``from … import …`` names: the base, and each name that is a module."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [target] + [f"{target}.{alias.name}" for alias in node.names]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph(*, anywhere: bool = False) -> dict[str, set[str]]:
    """Each module's imports that run: at module level, or (``anywhere``) also inside
    functions; never those under ``if TYPE_CHECKING``."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = _tree(path)
        found: set[str] = set()
        body = list(tree.body)
        while body:
            node = body.pop(0)
            if isinstance(node, ast.If) and _type_checking(node):
                body += node.orelse
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.update(_resolve(name, path.name == "__init__.py", node))
            elif isinstance(node, (ast.If, ast.Try, ast.With)) or (
                anywhere and isinstance(node, ast.stmt)
            ):
                body += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
                if isinstance(node, ast.Try):
                    body += [s for h in node.handlers for s in h.body]
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _without_ancestors(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A module that names its own package (``from . import x``) gets what the package's
    ``__init__`` already finished importing: that edge is how packages work, not a cycle."""
    return {k: {d for d in v if not k.startswith(d + ".")} for k, v in graph.items()}


@pytest.mark.parametrize("anywhere", [False, True], ids=["module-level", "anywhere"])
def test_no_import_cycles(anywhere: bool) -> None:
    assert cycles(_without_ancestors(import_graph(anywhere=anywhere))) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_modules_are_small() -> None:
    """No module in backendmgr/ over 500 lines: each says one thing."""
    big = {
        str(p.relative_to(PACKAGE)): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert big == {}


def test_services_do_not_inherit_from_each_other() -> None:
    for path in sorted((PACKAGE / "manager").glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                assert all(b in ("Protocol", "TypedDict") for b in bases), (
                    path.name,
                    node.name,
                    bases,
                )


def test_the_cli_sees_only_the_manager_and_the_contract() -> None:
    """Every import in ``cli/`` (at any depth) stays out of install/ and emit/."""
    for path in sorted((PACKAGE / "cli").rglob("*.py")):
        name = _module_name(path)
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom):
                for target in _resolve(name, path.name == "__init__.py", node):
                    assert not target.startswith(("backendmgr.install", "backendmgr.emit")), (
                        path.name,
                        target,
                    )


def _tricks(tree: ast.Module) -> list[str]:
    """Start-up tricks the package must not play: a module's own ``TYPE_CHECKING`` constant
    (typing's is the one mypy and readers know) and an assignment into a standard-library
    module (``argparse._ = …`` changes every other user of that module). The interpreter's
    hooks (``sys.unraisablehook`` …) are set by assignment: that is what they are for."""
    stdlib = {
        alias.asname or alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.split(".")[0] in sys.stdlib_module_names
    }
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "sys"
                and target.attr in SYS_HOOKS
            ):
                continue
            if isinstance(target, ast.Name) and target.id == "TYPE_CHECKING":
                found.append(f"line {node.lineno}: TYPE_CHECKING = …")
            while isinstance(target, ast.Attribute):
                target = target.value
                if isinstance(target, ast.Name) and target.id in stdlib:
                    found.append(f"line {node.lineno}: assigns into {target.id}")
    return found


SYS_HOOKS = frozenset({"unraisablehook", "excepthook", "displayhook", "breakpointhook"})


def test_no_start_up_tricks() -> None:
    assert {
        str(p.relative_to(PACKAGE)): t
        for p in sorted(PACKAGE.rglob("*.py"))
        if (t := _tricks(_tree(p)))
    } == {}


def test_the_trick_check_finds_tricks() -> None:
    bad = "import argparse\nimport os.path\nTYPE_CHECKING = False\nargparse._ = 1\nos.path.x = 2\n"
    assert _tricks(ast.parse(bad)) == [
        "line 3: TYPE_CHECKING = …",
        "line 4: assigns into argparse",
        "line 5: assigns into os",
    ]
    assert _tricks(ast.parse("from typing import TYPE_CHECKING\nx = 1\nself_x = object()\n")) == []
    hooks = "import sys\nsys.unraisablehook = print\nsys.modules = {}\nsys.flags.x = 1\n"
    assert _tricks(ast.parse(hooks)) == ["line 3: assigns into sys", "line 4: assigns into sys"]


def _service_names() -> set[str]:
    """What ``Services`` makes: the attributes ``services.py`` assigns on ``self`` and the
    properties that build a service on first use."""
    tree = _tree(PACKAGE / "manager" / "services.py")
    assigned = {
        t.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
    return assigned - {"ctx"} | {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d) in ("cached_property", "property") for d in node.decorator_list)
    }


def _facade_names() -> set[str]:
    """What ``backendmgr.manager`` exports (its ``__all__``): the façade and its types."""
    for node in _tree(PACKAGE / "manager" / "__init__.py").body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            return set(ast.literal_eval(node.value))
    return set()


def _reaches_services(tree: ast.Module, module: str, services: set[str]) -> list[str]:
    """Where a front end goes past the façade: the Manager's services (``_s``) or context
    (``ctx``), a service through the Manager (``mgr.swap.status()``), or a module of
    ``backendmgr.manager`` other than the package (its services, ``services`` itself)."""

    def named(node: ast.expr) -> str | None:
        return node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in ("_s", "ctx") and named(node.value) in ("mgr", "manager"):
                found.append(f"line {node.lineno}: .{node.attr}")
            inner = node.value
            if (
                isinstance(inner, ast.Attribute)
                and inner.attr in services
                and named(inner.value) in ("mgr", "manager")
            ):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom):
            for target in _resolve(module, False, node):
                if (
                    target.startswith("backendmgr.manager.")
                    and target.removeprefix("backendmgr.manager.") not in _facade_names()
                ):
                    found.append(f"line {node.lineno}: imports {target}")
    return found


def test_front_ends_reach_services_only_through_the_facade() -> None:
    """The CLI and the web call the Manager's operations, never a service behind it (issue 30)."""
    services = _service_names()
    assert {"measure", "bench", "swap", "canary", "bisect", "up", "probe"} <= services
    found = {}
    for face in ("cli", "web"):
        for path in sorted((PACKAGE / face).rglob("*.py")):
            name = _module_name(path)
            if path.name == "__init__.py":
                name += ".__init__"  # _resolve reads the level from the module's own name
            if hits := _reaches_services(_tree(path), name, services):
                found[str(path.relative_to(PACKAGE))] = hits
    assert found == {}


def test_the_facade_check_finds_a_service() -> None:
    bad = (
        "from ...manager.canary import canary\n"
        "from ...manager import services\n"
        "from ...manager import Manager\n"
        "async def f(mgr, c):\n"
        "    await mgr.measure.tune([])\n"
        "    await c.manager.swap.status()\n"
        "    mgr._s.models\n"
        "    mgr.ctx.paths\n"
        "    await mgr.bench([])\n"
        "    trial.ctx\n"
    )
    found = _reaches_services(
        ast.parse(bad), "backendmgr.cli.commands.x", {"measure", "swap", "bench", "models"}
    )
    assert sorted(found) == [
        "line 1: imports backendmgr.manager.canary",
        "line 1: imports backendmgr.manager.canary.canary",
        "line 2: imports backendmgr.manager.services",
        "line 5: mgr.measure.tune",
        "line 6: c.manager.swap.status",
        "line 7: ._s",
        "line 8: .ctx",
    ]
