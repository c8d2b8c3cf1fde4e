"""Sphinx configuration of placement's documentation.

Build: ``sphinx-build -W --keep-going -b html doc/source doc/build/html``
"""

import os
import sys

# The API reference extension, and placement itself from the checkout.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_ext"))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

project = "placement"
copyright = "placement contributors"
author = "placement contributors"


def _release() -> str:
    """The version of the package as the build gives it (pyproject.toml:
    git's, by setuptools-scm; see doc/source/contributor/contributing.rst),
    without its local part (``+g<commit>``): ``0.1.0`` at the tag of a
    release, ``0.1.1.dev3`` three commits after it."""
    from placement import release as placement_release

    return placement_release.release()


release = version = _release()

extensions = [
    "oslo_config.sphinxext",
    "oslo_policy.sphinxext",
    "placement_apiref",
]

# Sphinx's own theme: no menus, bug or source links of another project.
html_theme = "alabaster"
html_theme_options = {
    "description": f"OpenStack Placement API, a standalone implementation, {release}",
    "show_powered_by": False,
}
html_title = f"placement {release}"
html_show_sourcelink = False
html_copy_source = False

master_doc = "index"
exclude_patterns = ["_build"]
pygments_style = "sphinx"
html_static_path = []
