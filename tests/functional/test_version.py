"""The version is git's (setuptools-scm, pyproject.toml): a release is a
tag X.Y.Z, and a clone without tags still builds with a development
version."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from placement import release
from tests.fixtures import ops


def _git(*args: str, cwd: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, timeout=120).stdout.strip()


def _scm_version(root: str) -> str:
    """What setuptools-scm, configured by root's pyproject.toml, says."""
    return subprocess.run([sys.executable, "-m", "setuptools_scm"], cwd=root, check=True,
                          capture_output=True, text=True, timeout=120).stdout.strip()


def test_this_checkout_has_a_version_of_the_release_scheme():
    full = release.version_string()
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?(\+[0-9a-z.]+)?", full), full
    assert release.release() == full.split("+")[0]


def test_a_clone_without_tags_is_a_development_version_and_a_tag_a_release(tmp_path):
    clone = str(tmp_path / "clone")
    _git("clone", "--quiet", "--no-tags", "--no-local", ops.REPO_ROOT, clone, cwd=str(tmp_path))
    commits = int(_git("rev-list", "--count", "HEAD", cwd=clone))
    untagged = _scm_version(clone)
    assert re.fullmatch(rf"0\.1\.0\.dev{commits}\+g[0-9a-f]+", untagged), untagged
    _git("-c", "user.name=t", "-c", "user.email=t@example.com", "tag", "-a", "7.1.0",
         "-m", "7.1.0", cwd=clone)
    assert _scm_version(clone) == "7.1.0"
    assert not os.path.exists(os.path.join(clone, "PKG-INFO"))
