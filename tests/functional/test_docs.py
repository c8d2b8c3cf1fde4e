"""The documentation: it builds with warnings as errors, its API reference
(generated at build time) lists every route and method of the route table
and every microversion the service serves, the recipes README.rst keeps
for its tests say what the administrator guide says, and no path outside
the repository is cited anywhere users read."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

from placement import release, router, versions
from tests.fixtures import ops

DOC_SOURCE = os.path.join(ops.REPO_ROOT, "doc", "source")


@pytest.fixture(scope="module")
def text_build(tmp_path_factory) -> str:
    """The documentation built as plain text into a temporary directory,
    warnings as errors (as ``.ci/run`` builds the HTML)."""
    out = str(tmp_path_factory.mktemp("doc-text"))
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "text",
         DOC_SOURCE, out],
        cwd=ops.REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def html_build(tmp_path_factory) -> str:
    """The documentation built as HTML, as ``.ci/run`` builds it."""
    out = str(tmp_path_factory.mktemp("doc-html"))
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         DOC_SOURCE, out],
        cwd=ops.REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def api_reference(text_build) -> list[str]:
    with open(os.path.join(text_build, "reference", "api.txt"), encoding="utf-8") as page:
        return [line.strip() for line in page]


def test_every_route_and_method_is_in_the_api_reference(api_reference):
    # The empty path is the mount point, served like "/".
    served = {(path or "/", method) for path, methods in router.ROUTES.items()
              for method in methods}
    assert len(served) > 30
    missing = sorted((path, method) for path, method in served
                     if f'"{method} {path}"' not in api_reference)
    assert not missing, f"routes missing from the API reference: {missing}"


def test_every_served_microversion_is_in_the_api_reference(api_reference):
    first, last = versions.MIN_VERSION, versions.MAX_VERSION
    assert str(first) == "1.0"
    served = [str(first._replace(minor=minor)) for minor in range(first.minor, last.minor + 1)]
    text = "\n".join(api_reference)
    table = text[text.index("Microversions\n"):]
    missing = [version for version in served if f'| "{version}"' not in table]
    assert not missing, f"microversions missing from the API reference: {missing}"
    # ... each with the name of the gate it opens (placement.versions)
    gates = [name for name, value in vars(versions).items()
             if isinstance(value, versions.Version) and name.isupper()
             and name not in ("MIN_VERSION", "MAX_VERSION")]
    assert len(gates) > 30
    unnamed = [name for name in gates if name not in table]
    assert not unnamed, f"gates missing from the microversion table: {unnamed}"
    # Each operation's range ends at the newest version.
    assert f"Microversions: 1.0 - {last}" in text


def test_config_and_policy_references_are_generated(text_build):
    with open(os.path.join(text_build, "reference", "config.txt"), encoding="utf-8") as page:
        config = page.read()
    assert "auth_strategy" in config and "max_allocation_candidates" in config
    with open(os.path.join(text_build, "reference", "policy.txt"), encoding="utf-8") as page:
        policy = page.read()
    assert "placement:allocation_candidates:list" in policy


def _literal_block_after(text: str, marker: str) -> str:
    """The indented literal block following the first ``::`` after ``marker``."""
    start = text.index("::\n", text.index(marker)) + 3
    lines = []
    for line in text[start:].splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line)
    return "\n".join(lines).strip("\n")


def test_readme_recipes_match_the_admin_guide():
    with open(os.path.join(ops.REPO_ROOT, "README.rst"), encoding="utf-8") as readme:
        readme_text = readme.read()
    with open(os.path.join(DOC_SOURCE, "admin", "deploy.rst"), encoding="utf-8") as page:
        deploy = page.read()
    with open(os.path.join(DOC_SOURCE, "admin", "scaling-out.rst"), encoding="utf-8") as page:
        scaling = page.read()
    marker = "sites-available/placement-api.conf"
    assert _literal_block_after(readme_text, marker) == _literal_block_after(deploy, marker)
    marker = "etc/placement/galera.cnf"
    assert _literal_block_after(readme_text, marker) == _literal_block_after(scaling, marker)


def test_no_path_outside_the_repository_is_cited():
    needle = "../" + "shared"
    found = []
    paths = [os.path.join(ops.REPO_ROOT, "README.rst")]
    for top in ("doc", "placement"):
        for directory, subdirectories, files in os.walk(os.path.join(ops.REPO_ROOT, top)):
            subdirectories[:] = [name for name in subdirectories
                                 if name not in ("__pycache__", "build")]
            paths += [os.path.join(directory, name) for name in files
                      if not name.endswith((".pyc", ".png", ".jpg"))]
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as source:
            for number, line in enumerate(source, 1):
                if needle in line:
                    found.append(f"{os.path.relpath(path, ops.REPO_ROOT)}:{number}")
    assert not found, found


def test_the_pages_chrome_is_our_own(html_build):
    """The release (git's version of the checkout, placement.release) in
    every page's title, and no link of another project's chrome (bug
    trackers, source repositories, menus)."""
    shown = release.release()
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", shown), shown
    pages = glob.glob(os.path.join(html_build, "**", "*.html"), recursive=True)
    assert len(pages) > 20
    for page in pages:
        with open(page, encoding="utf-8") as html:
            text = html.read()
        if "<title>" not in text:
            continue
        (title,) = re.findall(r"<title>(.*?)</title>", text, re.DOTALL)
        assert title.endswith(f"placement {shown}"), (page, title)
        links = re.findall(r'href="(https?://[^"]*)"', text)
        foreign = [link for link in links
                   if re.search(r"openstack\.org|launchpad|opendev|storyboard", link)]
        assert not foreign, (page, foreign)
        assert "Report a bug" not in text, page


def test_readme_speed_figures_are_those_of_the_performance_page():
    """README.rst cannot include a table: its "How fast" figures must be
    those performance.rst keeps (this project's and the original's rate of
    each cell)."""
    with open(os.path.join(ops.REPO_ROOT, "README.rst"), encoding="utf-8") as readme:
        text = readme.read()
    section = text[text.index("How fast\n"):text.index("How big a box\n")]
    rows = re.findall(r"^\d[\d ]* computes, [a-z, ]+?\s+([\d.]+)\s+([\d.]+)\s+\d+x$",
                      section, re.MULTILINE)
    assert len(rows) == 6, section
    with open(os.path.join(DOC_SOURCE, "performance.rst"), encoding="utf-8") as page:
        performance = page.read()
    for ours, original in rows:
        assert re.search(rf"\s{re.escape(ours)} · .*\s{re.escape(original)} · ", performance), (
            ours, original)
