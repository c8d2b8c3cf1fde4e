"""The release notes (releasenotes/notes/, kept with reno as OpenStack
projects keep them) are well formed, and the first release's prelude says
what placement is. reno reads the notes from git: the tests run in the
checkout, which CI clones."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

from tests.fixtures import ops

NOTES = os.path.join(ops.REPO_ROOT, "releasenotes", "notes")


def _reno(*args: str) -> subprocess.CompletedProcess:
    beside_python = os.path.join(os.path.dirname(sys.executable), "reno")
    reno = beside_python if os.path.exists(beside_python) else shutil.which("reno")
    assert reno is not None, "reno is part of the test extra"
    return subprocess.run([reno, *args], cwd=ops.REPO_ROOT, capture_output=True, text=True,
                          timeout=300)


def test_reno_lint_finds_nothing():
    notes = glob.glob(os.path.join(NOTES, "*.yaml"))
    assert len(notes) >= 5, notes
    result = _reno("lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_report_opens_with_the_prelude_of_the_first_release():
    result = _reno("report", "--no-show-source")
    assert result.returncode == 0, result.stderr
    report = result.stdout
    assert "Prelude" in report, report
    assert "drop-in replacement for the original service" in report
    assert "1.0 to 1.39" in " ".join(report.split())
    assert report.index("Prelude") < report.index("New Features")
