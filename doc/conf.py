"""Sphinx configuration of the hexapod_control documentation (as rosdoc2 builds it, and as
``python -m sphinx -W -b html doc doc/_build/html`` does)."""

import sys
from pathlib import Path

# The package is documented from this source tree, installed or not (autodoc imports it).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

project = "hexapod_control"
author = "hexapod_control maintainers"
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
# Markdown: $...$ stays literal text; `[](page.md)` links take the page's title.
myst_enable_extensions = ["colon_fence"]
# Heading anchors for links such as [Errata](#errata) within and across pages.
myst_heading_anchors = 3

DOC_DIR = Path(__file__).resolve().parent
GLOB_LINE = "*"


def _drop_an_empty_glob(app, docname, source):
    """The index's toctree lists the pages it places and ends with ``*`` for topic pages dropped
    into doc/ later; with none left over, Sphinx would warn that the glob matched nothing."""
    if docname != root_doc:
        return
    lines = source[0].splitlines()
    listed = {line.strip() for line in lines}
    pages = {path.stem for path in DOC_DIR.glob("*.md")} | {path.stem for path in DOC_DIR.glob("*.rst")}
    if not pages - listed - {root_doc}:
        source[0] = "\n".join(line for line in lines if line.strip() != GLOB_LINE) + "\n"


def setup(app):
    app.connect("source-read", _drop_an_empty_glob)
