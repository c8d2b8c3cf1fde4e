"""Sphinx extension: the API reference, generated at build time from what
the service serves.

``.. placement-api-reference::`` renders every route of
``placement.router.ROUTES`` with each method, its microversion range, the
status it answers outside that range, its query parameters and its
response statuses, all read from the OpenAPI document
``placement.openapi.document`` builds from the same route table (the
document the service serves at ``GET /openapi.json``).

``.. placement-microversions::`` renders the table of every microversion
from ``placement.versions.MIN_VERSION`` to ``MAX_VERSION``, with the
names ``placement.versions`` gives to the features each one brings.

``render_reference()`` and ``render_microversions()`` return the
reStructuredText the directives parse, so that tests can read it without
running Sphinx.
"""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

from placement import openapi, router, versions

METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def served_routes(routes: openapi.Routes = router.ROUTES) -> list[tuple[str, str]]:
    """Every (path, method) of the route table. The empty path is the
    mount point itself, served like ``/``: it is listed as ``/``."""
    pairs = []
    for path, methods in routes.items():
        for method in methods:
            pair = (path or "/", method)
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def served_versions() -> list[str]:
    """Every microversion the service serves, oldest first."""
    first, last = versions.MIN_VERSION, versions.MAX_VERSION
    return [str(first._replace(minor=minor))
            for minor in range(first.minor, last.minor + 1)]


def _range_text(versions) -> str:
    """An ``x-openstack-microversions`` value (a range or a list of them)."""
    if isinstance(versions, list):
        return ", ".join(_range_text(span) for span in versions)
    if versions["min"] == versions["max"]:
        return versions["min"]
    return f"{versions['min']} - {versions['max']}"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """A list-table."""
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in (header, *rows):
        first = True
        for cell in row:
            lines.append(("   * - " if first else "     - ") + (cell or "--"))
            first = False
    lines.append("")
    return lines


def _statuses(operation: dict) -> tuple[list[tuple[str, ...]], list[str]]:
    """The success responses (status, versions, description) and the error
    statuses of an operation."""
    successes, failures = [], []
    for status, response in sorted(operation["responses"].items()):
        if status.startswith(("2", "3")):
            versions = response.get(openapi.EXTENSION, operation[openapi.EXTENSION])
            description = " ".join(response.get("description", "").split())
            successes.append((f"``{status}``", _range_text(versions), description))
        else:
            failures.append(status)
    return successes, failures


def _query_rows(operation: dict) -> list[tuple[str, ...]]:
    rows = []
    for parameter in operation.get("parameters", ()):
        if parameter.get("in") != "query":
            continue
        if parameter["name"] == "request_groups":
            for pattern, schema in parameter["schema"]["patternProperties"].items():
                rows.append((f"``{pattern}``", _range_text(schema[openapi.EXTENSION]),
                             "granular request group key"))
            continue
        note = "required" if parameter.get("required") else parameter.get("description", "")
        rows.append((f"``{parameter['name']}``",
                     _range_text(parameter[openapi.EXTENSION]), " ".join(note.split())))
    return rows


def render_reference(routes: openapi.Routes = router.ROUTES) -> str:
    """The reStructuredText of the whole API reference (of the route table
    ``routes``: the service's)."""
    document = openapi.document(routes)
    by_path: dict[str, list[str]] = {}
    for path, method in served_routes(routes):
        by_path.setdefault(path, []).append(method)
    lines: list[str] = []
    summary_rows = []
    for path, methods in by_path.items():
        for method in methods:
            operation = document["paths"][path][method.lower()]
            extension = " (extension)" if operation.get(openapi.EXTENSION_MARKER) else ""
            summary_rows.append((f"``{method} {path}``{extension}",
                                 _range_text(operation[openapi.EXTENSION]),
                                 " ".join(operation["summary"].split())))
    lines += ["Every route", "===========", ""]
    lines += _table(("Route", "Microversions", "Summary"), summary_rows)
    for path, methods in by_path.items():
        lines += [f"``{path}``", "=" * (len(path) + 4), ""]
        for method in sorted(methods, key=lambda m: (METHOD_ORDER.index(m)
                                                     if m in METHOD_ORDER else 99, m)):
            operation = document["paths"][path][method.lower()]
            title = f"``{method} {path}``"
            lines += [title, "-" * len(title), ""]
            lines += [" ".join(operation["summary"].split()), ""]
            if operation.get(openapi.EXTENSION_MARKER):
                lines += [".. note:: An extension of this service, not a route of the "
                          "original Placement API (``x-placement-extension`` in the "
                          "OpenAPI document).", ""]
            lines += [f"* Microversions: {_range_text(operation[openapi.EXTENSION])} "
                      f"(outside them: ``{operation['x-openstack-unavailable-status']}``)",
                      "* Token: " + ("not needed" if operation.get("security") == []
                                     else "required"),
                      f"* Handler: ``{operation['operationId']}``", ""]
            query = _query_rows(operation)
            if query:
                lines += ["Query parameters:", ""]
                lines += _table(("Parameter", "Microversions", "Notes"), query)
            successes, failures = _statuses(operation)
            lines += ["Responses:", ""]
            lines += _table(("Status", "Microversions", "Description"), successes)
            lines += ["Error statuses: " + ", ".join(f"``{status}``" for status in failures),
                      ""]
    return "\n".join(lines) + "\n"


def _features() -> dict[str, list[str]]:
    """Microversion -> names ``placement.versions`` gives it."""
    features: dict[str, list[str]] = {}
    for name, value in vars(versions).items():
        if (isinstance(value, versions.Version) and name.isupper()
                and name not in ("MIN_VERSION", "MAX_VERSION")):
            features.setdefault(str(value), []).append(name)
    return features


def render_microversions() -> str:
    features = _features()
    rows = [(f"``{version}``",
             ", ".join(f"``{name}``" for name in sorted(features.get(version, ())))
             or ("the base API" if version == served_versions()[0] else ""))
            for version in served_versions()]
    return "\n".join(_table(("Microversion", "Names in placement.versions"), rows)) + "\n"


class _Generated(SphinxDirective):
    has_content = False

    def render(self) -> str:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        container = nodes.section() if self.name.endswith("reference") else nodes.container()
        content = StringList(self.render().splitlines(), source="<placement-api-reference>")
        nested_parse_with_titles(self.state, content, container)
        return container.children


class ReferenceDirective(_Generated):
    def render(self) -> str:
        return render_reference()


class MicroversionsDirective(_Generated):
    def render(self) -> str:
        return render_microversions()


def setup(app):
    app.add_directive("placement-api-reference", ReferenceDirective)
    app.add_directive("placement-microversions", MicroversionsDirective)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
