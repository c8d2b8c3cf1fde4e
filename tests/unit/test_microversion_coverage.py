"""The gabbi files cover both sides of every microversion boundary.

For each version V named in the spec's microversion history (1.1 to 1.39)
some gabbi test must send ``openstack-api-version: placement V`` and some
test must send the version just below it. Besides that global check, the
boundary files (``gabbits/boundaries-*.yaml``) must hold, for each V, a test
named ``"V: ..."`` on each side of the boundary, so that every boundary has
a pair of tests that says what changes there.

The header is read the way gabbi sends it: a test's own
``request_headers`` override those of the file's ``defaults``.
"""

from __future__ import annotations

import functools
import os
import pathlib
import re

import pytest
import yaml

from placement import microversion
from placement import versions as mv
from placement.versions import Version

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
GABBITS = REPOSITORY / "gabbits"
BOUNDARY_FILES = "boundaries-*.yaml"
# The spec lives outside the repository, in the shared/ folder beside the
# checkout (as laid out for developers and CI); PLACEMENT_SPEC_DIR can point
# elsewhere.
HISTORY = pathlib.Path(
    os.environ.get("PLACEMENT_SPEC_DIR", REPOSITORY.parent / "shared" / "spec"),
    "microversion-history.md")

# A table row of the history: "| 1.19 | Aggregates GET/PUT bodies ... |".
HISTORY_ROW = re.compile(r"^\|\s*(\d+)\.(\d+)\s*\|", re.MULTILINE)
# A header value naming one placement version exactly ("placement 1.19").
PLACEMENT_VERSION = re.compile(r"^\s*placement\s+(\d+)\.(\d+)\s*$", re.IGNORECASE)
HEADER = microversion.HEADER


def history_versions(text: str) -> list[Version]:
    """Versions of the history table, in table order."""
    return [Version(int(major), int(minor)) for major, minor in HISTORY_ROW.findall(text)]


@functools.cache
def boundary_versions() -> tuple[Version, ...]:
    """Every version at which something changes: 1.1 ... 1.39 from the spec's
    history, or from the service's own range when the spec is not around."""
    if HISTORY.exists():
        versions = history_versions(HISTORY.read_text())
    else:
        versions = [Version(1, minor) for minor in range(mv.MAX_VERSION.minor + 1)]
    return tuple(version for version in versions if version > mv.MIN_VERSION)


def _headers(mapping: dict | None) -> dict[str, str]:
    return {str(name).lower(): str(value) for name, value in (mapping or {}).items()}


def sent_version(test: dict, defaults: dict) -> Version | None:
    """The placement version a gabbi test sends, None if it sends no exact
    version (no header, ``latest``, templates or a malformed value)."""
    headers = _headers((defaults or {}).get("request_headers"))
    headers.update(_headers(test.get("request_headers")))
    match = PLACEMENT_VERSION.match(headers.get(HEADER, ""))
    return Version(int(match[1]), int(match[2])) if match else None


@functools.cache
def versions_sent_by(pattern: str) -> dict[Version, list[str]]:
    """{version: "<file stem>: <test name>" of the tests that send it} over
    gabbits/<pattern> (cached: the YAML is read once per run)."""
    found: dict[Version, list[str]] = {}
    for path in sorted(GABBITS.glob(pattern)):
        document = yaml.safe_load(path.read_text())
        for test in document.get("tests", []):
            version = sent_version(test, document.get("defaults"))
            if version is not None:
                found.setdefault(version, []).append(f"{path.stem}: {test['name']}")
    return found


def just_below(version: Version) -> Version:
    return Version(version.major, version.minor - 1)


def test_history_lists_every_version_up_to_the_newest():
    versions = boundary_versions()
    assert versions[0] == Version(1, 1)
    assert versions[-1] == mv.MAX_VERSION
    assert list(versions) == [Version(1, minor) for minor in range(1, 40)]


def test_history_rows_are_parsed():
    text = "| Ver | Change |\n|---|---|\n| 1.0 | Base |\n| 1.19 | Aggregates |\n"
    assert history_versions(text) == [Version(1, 0), Version(1, 19)]


def test_sent_version_prefers_the_test_header_to_the_defaults():
    defaults = {"request_headers": {"OpenStack-API-Version": "placement 1.30"}}
    assert sent_version({}, defaults) == Version(1, 30)
    assert sent_version({"request_headers": {HEADER: "placement 1.29"}}, defaults) == (
        Version(1, 29))
    assert sent_version({"request_headers": {HEADER: "placement latest"}}, defaults) is None
    assert sent_version({}, None) is None


@pytest.mark.parametrize("version", boundary_versions(), ids=str)
def test_some_gabbi_test_sends_each_side_of_the_boundary(version):
    sent = versions_sent_by("*.yaml")
    assert sent.get(version), f"no gabbi test sends placement {version}"
    assert sent.get(just_below(version)), f"no gabbi test sends placement {just_below(version)}"


@pytest.mark.parametrize("version", boundary_versions(), ids=str)
def test_boundary_files_name_both_sides_of_the_boundary(version):
    named = {
        sent: [name for name in names if name.split(": ", 1)[1].startswith(f"{version}: ")]
        for sent, names in versions_sent_by(BOUNDARY_FILES).items()
    }
    assert named.get(version), f"no test named '{version}: ...' sends placement {version}"
    below = just_below(version)
    assert named.get(below), f"no test named '{version}: ...' sends placement {below}"
