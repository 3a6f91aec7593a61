"""The package's shape: no import cycle, small modules and classes, no reaching into privates.

Read from the source with ``ast`` (nothing is imported, no sockets), over every
module of ``redlock_async`` - ``redlock_async/testing/`` included: it ships in
the wheel, imports the settings (``.._base._address``) and is imported by the
CLI (``demo``), so a cycle through it is a cycle of the package, and the rules
cost it nothing.

The rules:

- no import cycle among the package's modules, counting imports under
  ``if TYPE_CHECKING:`` and inside functions (relative imports resolved; an
  import of a package is an import of its ``__init__``; ``from P import M``
  where ``M`` is a submodule of ``P`` is an import of ``M``);
- imports point down the layers (``LAYERS``): a module imports its own folder
  and the layers below its folder's, never one above nor a folder beside its
  own in the same layer (``TYPE_CHECKING`` and function-local imports count);
- no module over 400 lines, no class over 250 lines;
- no function over 80 lines (``def`` to its last line, docstring included,
  decorators not) in the layers that decide a grant and run it: ``_core/``,
  ``_engine/`` with its drivers, ``_kinds/`` (``SHORT_FUNCTIONS``) - the code
  anyone should be able to read at once;
- no module imports an underscore-prefixed name from another module of the
  package (``from ._lock import _UNSET``), nor reads one as an attribute of an
  imported module of the package (``_lock._UNSET``). Private *modules* may be
  imported (``from ._engine import _node``, ``from . import _keys``); dunder
  names are not private.

The checks are plain functions over a directory; the ``test_check_*`` tests run
them on small packages written to ``tmp_path``, so each check is shown to
catch what it forbids and to pass code that obeys it.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "redlock_async"

MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 250
MAX_FUNCTION_LINES = 80
# The folders (with their subfolders) whose functions must read at once.
SHORT_FUNCTIONS = ("_core", "_engine", "_kinds")

# The package's layers, lowest first; each a tuple of the folders (or
# top-level modules) in it. "" is the package root: the face, every module
# directly under redlock_async/ that is not named here (__init__, _redlock,
# _whoholds, _exports). docs/internals.md draws the same tree.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_base",),  # settings every layer reads: config, keys, timing, errors, telemetry
    ("_engine",),  # one command on N nodes, the votes; nothing about locks
    ("_core",),  # the one lock layer: Lock, acquire, release, extend, renewal, grants
    ("_kinds",),  # the kinds of lock a user holds: rwlock, semaphore, multilock...
    ("",),  # the face: Redlock, the public names
    ("sync", "testing"),  # for threads; throwaway nodes for tests (neither uses the other)
    ("_cli",),  # the command line, over the face and testing
    ("__main__",),  # python -m redlock_async: runs the CLI
)


@dataclass(frozen=True)
class Module:
    name: str  # dotted: redlock_async._engine._core
    path: Path
    is_package: bool  # an __init__.py
    source: str
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package that relative imports in this module start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    where: str  # "", "under TYPE_CHECKING", "in def f"

    def describe(self) -> str:
        where = f", {self.where}" if self.where else ""
        return f"{self.source} -> {self.target} (line {self.line}{where})"


def load_package(root: Path, package: str) -> dict[str, Module]:
    """Every module under ``root / package``, by dotted name."""
    modules: dict[str, Module] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        source = path.read_text(encoding="utf-8")
        name = ".".join(parts)
        modules[name] = Module(name, path, is_package, source, ast.parse(source, str(path)))
    return modules


def _resolve_from(module: Module, node: ast.ImportFrom) -> str | None:
    """The absolute module a ``from ... import`` names (None if it climbs out)."""
    if node.level == 0:
        return node.module
    parts = module.package.split(".")
    if node.level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement anywhere in the module, with where it sits."""

    def walk(node: ast.AST, where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, where
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                yield from walk(statement, where or "under TYPE_CHECKING")
            for statement in node.orelse:
                yield from walk(statement, where)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            where = where or f"in def {node.name}"
        for child in ast.iter_child_nodes(node):
            yield from walk(child, where)

    yield from walk(tree, "")


def _bound_modules(module: Module, modules: Mapping[str, Module]) -> dict[str, str]:
    """Local names that the module's imports bind to modules of the package."""
    bound: dict[str, str] = {}
    for node, _ in _imports(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    if alias.name in modules:
                        bound[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    if top in modules:
                        bound[top] = top
        else:
            base = _resolve_from(module, node)
            if base is None:
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def import_edges(modules: Mapping[str, Module]) -> list[Edge]:
    """Every import of one module of the package by another."""
    edges: list[Edge] = []
    for module in modules.values():
        for node, where in _imports(module.tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve_from(module, node)
                if base is None:
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in dict.fromkeys(targets):
                if target in modules and target != module.name:
                    edges.append(Edge(module.name, target, node.lineno, where))
    return edges


def _strongly_connected(graph: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(sorted(component))
    return found


def _shortest_path(graph: Mapping[str, Sequence[str]], start: str, goal: str) -> list[str]:
    """Breadth-first: the shortest path from start to goal (both included)."""
    came_from: dict[str, str] = {start: start}
    frontier = [start]
    while goal not in came_from:
        following: list[str] = []
        for node in frontier:
            for child in graph[node]:
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    path = [goal]
    while path[-1] != start:
        path.append(came_from[path[-1]])
    return path[::-1]


def import_cycles(modules: Mapping[str, Module]) -> list[list[Edge]]:
    """Import cycles: for every import that is part of one, the shortest cycle through it.

    Each group of modules that import each other (a strongly connected
    component) shows up as the cycles that, broken, would break it apart.
    """
    graph: dict[str, list[str]] = {name: [] for name in modules}
    first: dict[tuple[str, str], Edge] = {}
    for edge in import_edges(modules):
        if (edge.source, edge.target) not in first:
            first[(edge.source, edge.target)] = edge
            graph[edge.source].append(edge.target)
    cycles: dict[tuple[str, ...], list[Edge]] = {}
    for component in _strongly_connected(graph):
        members = set(component)
        inside = {name: [t for t in graph[name] if t in members] for name in component}
        for source in component:
            for target in inside[source]:
                nodes = [source, *_shortest_path(inside, target, source)[:-1]]
                turn = nodes.index(min(nodes))  # the same cycle, found from any of its edges
                nodes = nodes[turn:] + nodes[:turn]
                ring = [*nodes, nodes[0]]
                cycles.setdefault(tuple(nodes), [first[pair] for pair in itertools.pairwise(ring)])
    return [cycles[key] for key in sorted(cycles, key=lambda key: (len(key), key))]


def long_modules(modules: Mapping[str, Module], limit: int = MAX_MODULE_LINES) -> list[str]:
    return [
        f"{_rel(module.path)}: {count} lines"
        for module in modules.values()
        if (count := len(module.source.splitlines())) > limit
    ]


def long_classes(modules: Mapping[str, Module], limit: int = MAX_CLASS_LINES) -> list[str]:
    found: list[str] = []
    for module in modules.values():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                count = (node.end_lineno or node.lineno) - first + 1
                if count > limit:
                    found.append(
                        f"{_rel(module.path)}:{node.lineno} class {node.name}: {count} lines"
                    )
    return found


def long_functions(
    modules: Mapping[str, Module],
    package: str,
    folders: Sequence[str] = SHORT_FUNCTIONS,
    limit: int = MAX_FUNCTION_LINES,
) -> list[str]:
    """Functions (methods and nested ones too) over ``limit`` lines in ``folders``."""
    prefixes = tuple(f"{package}.{folder}." for folder in folders)
    found: list[str] = []
    for name, module in modules.items():
        if not (name + ".").startswith(prefixes):
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                count = (node.end_lineno or node.lineno) - node.lineno + 1
                if count > limit:
                    found.append(
                        f"{_rel(module.path)}:{node.lineno} def {node.name}: {count} lines"
                    )
    return found


def private_reaches(modules: Mapping[str, Module]) -> list[str]:
    """Private names imported from, or read off, another module of the package."""
    found: list[str] = []
    for module in modules.values():
        where = _rel(module.path)
        for node, _ in _imports(module.tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _resolve_from(module, node)
            if base is None or base not in modules or base == module.name:
                continue
            for alias in node.names:
                if _is_private(alias.name) and f"{base}.{alias.name}" not in modules:
                    found.append(f"{where}:{node.lineno} imports {alias.name} from {base}")
        bound = _bound_modules(module, modules)
        for attr in ast.walk(module.tree):
            if not isinstance(attr, ast.Attribute):
                continue
            target = _module_of(attr.value, bound, modules)
            if target is None or target == module.name:
                continue
            if _is_private(attr.attr) and f"{target}.{attr.attr}" not in modules:
                found.append(f"{where}:{attr.lineno} reads {attr.attr} of {target}")
    return found


def layer_of(module: str, package: str, modules: Mapping[str, Module]) -> str | None:
    """The folder (or top-level module) that places ``module`` in the layers.

    ``""`` for the package root's own modules; the folder's name for a module
    in a folder, however deep; None for ``__main__``-like top-level modules,
    whose own name is looked up instead (see ``layer_violations``).
    """
    if module == package:
        return ""
    first = module[len(package) + 1 :].partition(".")[0]
    top = modules.get(f"{package}.{first}")
    return first if top is not None and top.is_package else None


def layer_violations(
    modules: Mapping[str, Module], package: str, layers: Sequence[Sequence[str]]
) -> list[str]:
    """Imports that go up the layers, or across to another folder of the same layer;
    and folders that are in no layer."""
    rank = {name: i for i, group in enumerate(layers) for name in group}

    def place(module: str) -> str:
        folder = layer_of(module, package, modules)
        if folder is None:  # a module at the root: the face, unless named itself
            top = module[len(package) + 1 :]
            return top if top in rank else ""
        return folder

    found = [
        f"{folder}/ is in no layer"
        for folder in sorted({place(name) for name in modules} - set(rank))
    ]
    for edge in import_edges(modules):
        source, target = place(edge.source), place(edge.target)
        if source == target or source not in rank or target not in rank:
            continue
        if rank[target] > rank[source]:
            found.append(f"{edge.describe()}: {source or 'the root'} imports a layer above it")
        elif rank[target] == rank[source]:
            found.append(f"{edge.describe()}: {source or 'the root'} imports a folder beside it")
    return found


def _module_of(
    node: ast.expr, bound: Mapping[str, str], modules: Mapping[str, Module]
) -> str | None:
    """The package's module an expression such as ``_engine._node`` names, if any."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        parent = _module_of(node.value, bound, modules)
        if parent is not None and f"{parent}.{node.attr}" in modules:
            return f"{parent}.{node.attr}"
    return None


def _rel(path: Path) -> str:
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def _listing(found: Sequence[str]) -> str:
    return "\n".join(f"  {line}" for line in found)


# The rules on this project's package.


@pytest.fixture(scope="module")
def package() -> dict[str, Module]:
    modules = load_package(ROOT, PACKAGE)
    assert f"{PACKAGE}._core._lock" in modules, "the package's sources were not found"
    return modules


def test_no_import_cycle(package: dict[str, Module]) -> None:
    cycles = import_cycles(package)
    described = [
        " -> ".join([cycle[0].source, *(edge.target for edge in cycle)])
        + "\n"
        + _listing([edge.describe() for edge in cycle])
        for cycle in cycles
    ]
    assert not cycles, (
        f"{len(cycles)} import cycle(s) in {PACKAGE} (TYPE_CHECKING and function-local "
        "imports count):\n" + "\n".join(described)
    )


def test_no_module_over_400_lines(package: dict[str, Module]) -> None:
    found = long_modules(package)
    assert not found, f"modules over {MAX_MODULE_LINES} lines:\n{_listing(found)}"


def test_no_class_over_250_lines(package: dict[str, Module]) -> None:
    found = long_classes(package)
    assert not found, f"classes over {MAX_CLASS_LINES} lines:\n{_listing(found)}"


def test_no_function_over_80_lines_where_grants_are_decided(package: dict[str, Module]) -> None:
    found = long_functions(package, PACKAGE)
    assert not found, (
        f"functions over {MAX_FUNCTION_LINES} lines in {', '.join(SHORT_FUNCTIONS)} "
        f"(split them into steps with names):\n{_listing(found)}"
    )


def test_no_private_name_crosses_modules(package: dict[str, Module]) -> None:
    found = private_reaches(package)
    assert not found, (
        "private names used outside their module (make them public in a private "
        f"module, or move the code):\n{_listing(found)}"
    )


def test_imports_point_down_the_layers(package: dict[str, Module]) -> None:
    found = layer_violations(package, PACKAGE, LAYERS)
    assert not found, (
        "imports against the layers (a module imports its own folder and the layers "
        f"below, see LAYERS; move the code down, not the import into a function):\n"
        f"{_listing(found)}"
    )


# The checks themselves, on packages written to tmp_path.


def write_package(root: Path, files: Mapping[str, str]) -> dict[str, Module]:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return load_package(root, "fake")


CLEAN = {
    "fake/__init__.py": "from ._api import Api as Api\n__version__ = '1'\n",
    "fake/_api.py": (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from . import _util\n"
        "from ._engine import _node\n"
        "from ._engine._core import Core\n"
        "import fake._util as util\n"
        "if TYPE_CHECKING:\n"
        "    from ._engine._node import Node\n"
        "class Api:\n"
        "    def __init__(self) -> None:\n"
        "        self._core = Core()\n"  # its own private attribute: fine
        "        self.size = _util.SIZE + util.SIZE + len(_node.__name__)\n"
        "    def node(self) -> Node:\n"
        "        from ._engine._node import Node\n"
        "        return Node()\n"
    ),
    "fake/_util.py": "import os\nSIZE = 1\n_HIDDEN = os.sep\nprint(_HIDDEN)\n",
    "fake/_engine/__init__.py": "from ._node import Node as Node\n",
    "fake/_engine/_node.py": "from .. import _util\nclass Node:\n    size = _util.SIZE\n",
    "fake/_engine/_core.py": (
        "from .._util import SIZE\nfrom ._node import Node\nclass Core(Node): ...\n"
    ),
}


def test_check_accepts_a_clean_package(tmp_path: Path) -> None:
    modules = write_package(tmp_path, CLEAN)
    assert len(modules) == 6
    assert import_cycles(modules) == []
    assert long_modules(modules) == []
    assert long_classes(modules) == []
    assert long_functions(modules, "fake", ("_engine",)) == []
    assert private_reaches(modules) == []
    edges = {(edge.source, edge.target) for edge in import_edges(modules)}
    assert ("fake._api", "fake._util") in edges  # from . import _util: the submodule
    assert ("fake._api", "fake._engine._node") in edges
    assert ("fake._engine._node", "fake._util") in edges  # from .. import _util
    assert ("fake", "fake._api") in edges


@pytest.mark.parametrize(
    ("files", "cycle", "closed_by"),
    [
        pytest.param(
            {
                "fake/_engine/_core.py": (
                    "from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n"
                    "    from .._api import Api\n"
                )
            },
            ["fake._api", "fake._engine._core", "fake._api"],
            "under TYPE_CHECKING",
            id="type-checking",
        ),
        pytest.param(
            {"fake/_util.py": "def f() -> None:\n    from ._api import Api\n"},
            ["fake._api", "fake._util", "fake._api"],
            "in def f",
            id="function-local",
        ),
        pytest.param(
            {"fake/_util.py": "import fake\n"},
            ["fake", "fake._api", "fake._util", "fake"],
            "",
            id="package-init",
        ),
        pytest.param(
            {"fake/_engine/_node.py": "from .. import Api\n"},
            ["fake", "fake._api", "fake._engine._node", "fake"],
            "",
            id="name-from-package-init",
        ),
        pytest.param(
            {"fake/_util.py": "from fake._engine import Node\n"},
            ["fake._engine", "fake._engine._node", "fake._util", "fake._engine"],
            "",
            id="subpackage-init",
        ),
    ],
)
def test_check_finds_import_cycles(
    tmp_path: Path, files: dict[str, str], cycle: list[str], closed_by: str
) -> None:
    modules = write_package(tmp_path, {**CLEAN, **files})
    found = import_cycles(modules)
    for edges in found:  # each one a closed chain of real imports
        assert [edge.target for edge in edges[:-1]] == [edge.source for edge in edges[1:]]
        assert edges[-1].target == edges[0].source
    as_names = [[edges[0].source, *(edge.target for edge in edges)] for edges in found]
    assert cycle in as_names, as_names
    closing = found[as_names.index(cycle)][-1]  # the import the change added
    assert closing.where == closed_by
    # The clean package had no cycle: every one found goes through that import.
    for edges in found:
        assert (closing.source, closing.target) in {(e.source, e.target) for e in edges}


def test_check_finds_long_modules_and_classes(tmp_path: Path) -> None:
    def body(lines: int, indent: str = "    ") -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(lines))

    modules = write_package(
        tmp_path,
        {
            **CLEAN,
            "fake/_big.py": "x = 1\n" * 401,
            "fake/_fits.py": "x = 1\n" * 400,
            "fake/_wide.py": f"@decorator\nclass Wide:\n{body(250)}",  # 252 lines
            "fake/_narrow.py": f"class Narrow:\n{body(249)}",  # 250 lines: fits
            "fake/_nested.py": f"def f() -> None:\n    class Inner:\n{body(250, ' ' * 8)}",
        },
    )
    assert [line.rsplit("/", 1)[-1] for line in long_modules(modules)] == ["_big.py: 401 lines"]
    assert sorted(line.rsplit("/", 1)[-1] for line in long_classes(modules)) == [
        "_nested.py:2 class Inner: 251 lines",
        "_wide.py:2 class Wide: 252 lines",
    ]


def test_check_finds_long_functions_in_the_named_folders_only(tmp_path: Path) -> None:
    def body(lines: int, indent: str = "    ") -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(lines))

    modules = write_package(
        tmp_path,
        {
            **CLEAN,
            "fake/_engine/_long.py": f"@decorator\nasync def long() -> None:\n{body(80)}",
            "fake/_engine/_fits.py": f"def fits() -> None:\n{body(79)}",  # 80 lines
            "fake/_engine/sub/_deep.py": (
                f"class Holder:\n    def method(self) -> None:\n{body(81, ' ' * 8)}"
            ),
            "fake/_elsewhere.py": f"def elsewhere() -> None:\n{body(200)}",  # not checked
        },
    )
    found = long_functions(modules, "fake", ("_engine",))
    assert sorted(line.rsplit("/", 1)[-1] for line in found) == [
        "_deep.py:2 def method: 82 lines",
        "_long.py:2 def long: 81 lines",
    ]


def test_check_finds_private_names_across_modules(tmp_path: Path) -> None:
    modules = write_package(
        tmp_path,
        {
            **CLEAN,
            "fake/_bad.py": (
                "from ._util import _HIDDEN, SIZE\n"
                "from fake._util import _HIDDEN as hidden\n"
                "from . import _util\n"
                "from ._engine import _node\n"
                "import fake._util\n"
                "import fake._engine._core as core\n"
                "def f() -> None:\n"
                "    from ._engine._node import _private\n"
                "print(_util._HIDDEN, _node._x, fake._util._HIDDEN, core._y, SIZE, hidden)\n"
                "print(_util.__name__, fake._engine._node.Node, fake._engine._node._z)\n"
            ),
        },
    )
    found = [line.rsplit("/", 1)[-1] for line in private_reaches(modules)]
    assert sorted(found) == sorted(
        [
            "_bad.py:1 imports _HIDDEN from fake._util",
            "_bad.py:2 imports _HIDDEN from fake._util",
            "_bad.py:8 imports _private from fake._engine._node",
            "_bad.py:9 reads _HIDDEN of fake._util",
            "_bad.py:9 reads _x of fake._engine._node",
            "_bad.py:9 reads _HIDDEN of fake._util",
            "_bad.py:9 reads _y of fake._engine._core",
            "_bad.py:10 reads _z of fake._engine._node",
        ]
    )


LAYERED = {
    "fake/__init__.py": "from ._front import Front as Front\n",
    "fake/__main__.py": "from ._cli import main\nmain()\n",
    "fake/_front.py": (
        "from ._mid._lock import Lock\nfrom ._side import _other\nfrom ._low import _names\n"
        "class Front(Lock): ...\n"
    ),
    "fake/_cli/__init__.py": "from .. import Front\ndef main() -> None: ...\n",
    "fake/_low/__init__.py": "",
    "fake/_low/_names.py": "NAMES = 1\n",
    "fake/_low/deep/__init__.py": "",
    "fake/_low/deep/_far.py": "from .. import _names\n",
    "fake/_mid/__init__.py": "",
    "fake/_mid/_lock.py": "from .._low._names import NAMES\nfrom . import _part\nclass Lock: ...\n",
    "fake/_mid/_part.py": "from ..._low.deep import _far\n",
    "fake/_side/__init__.py": "",
    "fake/_side/_other.py": "import fake._low._names\n",
}
FAKE_LAYERS = (("_low",), ("_mid", "_side"), ("",), ("_cli",), ("__main__",))


def test_check_accepts_imports_down_the_layers(tmp_path: Path) -> None:
    modules = write_package(tmp_path, LAYERED)
    assert layer_violations(modules, "fake", FAKE_LAYERS) == []
    assert layer_of("fake._low.deep._far", "fake", modules) == "_low"
    assert layer_of("fake._front", "fake", modules) is None
    assert layer_of("fake", "fake", modules) == ""


def test_check_finds_imports_against_the_layers(tmp_path: Path) -> None:
    modules = write_package(
        tmp_path,
        {
            **LAYERED,
            "fake/_low/_up.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from .._mid._lock import Lock\n"
                "def f() -> None:\n"
                "    from fake import Front\n"
            ),
            "fake/_mid/_across.py": "from .._side import _other\n",
            "fake/_front.py": "from ._cli import main\n",
            "fake/_stray/__init__.py": "from .._low import _names\n",
        },
    )
    found = layer_violations(modules, "fake", FAKE_LAYERS)
    assert sorted(found) == sorted(
        [
            "_stray/ is in no layer",
            "fake._low._up -> fake._mid._lock (line 3, under TYPE_CHECKING): "
            "_low imports a layer above it",
            "fake._low._up -> fake (line 5, in def f): _low imports a layer above it",
            "fake._mid._across -> fake._side._other (line 1): _mid imports a folder beside it",
            "fake._front -> fake._cli (line 1): the root imports a layer above it",
        ]
    )
