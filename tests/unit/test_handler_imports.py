"""Handler modules share their helpers through placement.handlers.util
only, never by importing a sibling handler module."""

from __future__ import annotations

import ast
import pathlib

import placement.handlers

HANDLERS = pathlib.Path(placement.handlers.__file__).parent


def _imported_handler_modules(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "placement.handlers":
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "placement.handlers."):
            names.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            names.update(alias.name.rsplit(".", 1)[1] for alias in node.names
                         if alias.name.startswith("placement.handlers."))
    return names


def test_handlers_import_no_sibling_handler_module():
    offenders = {path.name: sorted(_imported_handler_modules(path) - {"util"})
                 for path in sorted(HANDLERS.glob("*.py"))}
    assert {name: found for name, found in offenders.items() if found} == {}
