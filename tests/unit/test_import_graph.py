"""The package's imports run one way: no module imports, directly or
through others, a module that imports it back, and the lower layers
(schemas, objects, the candidate engine, the database) import nothing of
the WSGI layer (WebOb, the middleware, the microversion layer, the
handlers). Every import counts, those inside functions and under
TYPE_CHECKING too: a circle dodged by a late import is still a circle."""

from __future__ import annotations

import ast
import pathlib

import placement

PACKAGE = pathlib.Path(placement.__file__).parent
MIGRATIONS = PACKAGE / "db" / "alembic"

# The modules of the WSGI layer, and the outside names that are WSGI.
WSGI_MODULES = {"placement.middleware", "placement.microversion", "placement.wsgi_util",
                "placement.router", "placement.deploy", "placement.wsgi",
                "placement.healthcheck", "placement.request_data"}
WSGI_PACKAGES = ("placement.handlers", "webob", "routes", "keystonemiddleware",
                 "oslo_middleware")
LOWER_LAYERS = ("placement.schemas", "placement.objects", "placement.candidates",
                "placement.capacity",
                "placement.db", "placement.versions", "placement.exceptions")


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """Every module ``path`` imports (placement's, as module names; others
    as their top-level or dotted name)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # "from placement import errors" imports the module placement.errors
            found.update(f"{node.module}.{alias.name}" for alias in node.names
                         if f"{node.module}.{alias.name}" in modules)
    return found


def _graph() -> dict[str, set[str]]:
    paths = [path for path in PACKAGE.rglob("*.py") if MIGRATIONS not in path.parents]
    modules = {_module_name(path) for path in paths}
    return {_module_name(path): _imports(path, modules) for path in paths}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module
    (Tarjan), among placement's modules (a package importing its own
    submodules, as ``__init__`` may, is not a circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def edges(module: str) -> list[str]:
        return [other for other in graph[module] if other in graph
                and not module.startswith(other + ".") and not other.startswith(module + ".")]

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return components


def test_no_import_circle():
    assert _cycles(_graph()) == []


def test_lower_layers_know_nothing_of_wsgi():
    offenders = {}
    for module, imported in _graph().items():
        if not module.startswith(LOWER_LAYERS):
            continue
        wsgi = sorted(name for name in imported
                      if name in WSGI_MODULES or name.startswith(WSGI_PACKAGES))
        if wsgi:
            offenders[module] = wsgi
    assert offenders == {}


def test_the_graph_sees_imports():
    """The test reads real edges: the handlers import the WSGI layer, and
    a circle made up here is found."""
    graph = _graph()
    assert "placement.microversion" in graph["placement.handlers.allocation_candidate"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
