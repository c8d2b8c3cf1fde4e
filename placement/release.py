"""The version of this placement: the one its build recorded (git's, by
setuptools-scm, see pyproject.toml) or, in a git checkout, what git says of
it now (an editable install keeps the version of the commit it was
installed at)."""

from __future__ import annotations

import importlib.metadata
import os

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def version_string() -> str:
    """The full version: ``0.1.0`` at the tag of a release, ``0.1.1.dev3+gabc1234``
    three commits after it."""
    if os.path.exists(os.path.join(_ROOT, ".git")):
        try:
            import setuptools_scm
        except ImportError:
            pass
        else:
            # As the build does: pyproject.toml's [tool.setuptools_scm].
            config = setuptools_scm.Configuration.from_file(
                os.path.join(_ROOT, "pyproject.toml"))
            return setuptools_scm.get_version(
                root=_ROOT, version_scheme=config.version_scheme,
                local_scheme=config.local_scheme, fallback_version=config.fallback_version)
    return importlib.metadata.version("placement")


def release() -> str:
    """The version without its local part (``+g<commit>...``)."""
    return version_string().split("+", 1)[0]
