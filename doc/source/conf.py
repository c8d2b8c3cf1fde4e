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
release = version = "0.1.0"

extensions = [
    "openstackdocstheme",
    "oslo_config.sphinxext",
    "oslo_policy.sphinxext",
    "placement_apiref",
]

# openstackdocstheme
openstackdocs_repo_name = "placement"
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
openstackdocs_bug_project = "placement"
openstackdocs_bug_tag = "doc"
html_theme = "openstackdocs"

master_doc = "index"
exclude_patterns = ["_build"]
pygments_style = "native"
html_static_path = []
