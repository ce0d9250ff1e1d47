"""A build check: a printed line wider than the page is a warning (an error under
``--warningiserror``, as ``make book`` runs), naming the page, the cell's output
and the width.

The book's pages print tables; a line longer than the text column is either
wrapped by the browser (outputs.css) or, before that, cut at the right edge, and
a table wrapped mid-row is hard to read either way. ``output_max_width`` in
``_config.yml`` sets the limit in characters; ``output_width_pages`` names the
pages checked (a prefix each), all when empty.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _is_output(node) -> bool:
    while node is not None:
        if "cell_output" in node.get("classes", []):
            return True
        node = node.parent
    return False


def wide_lines(doctree, limit: int):
    """``(block, line number, line)`` for the first too-wide line of each printed output."""
    for block in doctree.findall(nodes.literal_block):
        if not _is_output(block):
            continue
        for k, line in enumerate(block.astext().splitlines()):
            if len(line.expandtabs()) > limit:
                yield block, k + 1, line
                break


def check(app, doctree, docname) -> None:
    pages = app.config.output_width_pages
    if pages and not any(docname.startswith(p) for p in pages):
        return
    limit = app.config.output_max_width
    for block, k, line in wide_lines(doctree, limit):
        logger.warning(
            "printed line %d is %d characters, wider than the page (%d): %r",
            k,
            len(line),
            limit,
            line[:60] + "...",
            location=block,
        )


def setup(app):
    app.add_config_value("output_max_width", 100, "env")
    app.add_config_value("output_width_pages", [], "env")
    app.connect("doctree-resolved", check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
