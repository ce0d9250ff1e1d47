"""The book's build check for printed output wider than the page (book/_ext/output_width.py)."""

import importlib.util
from pathlib import Path

from docutils import nodes

_path = Path(__file__).resolve().parents[1] / "book" / "_ext" / "output_width.py"
_spec = importlib.util.spec_from_file_location("output_width", _path)
output_width = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(output_width)


def _page(text: str, output: bool = True) -> nodes.document:
    doc = nodes.section()
    box = nodes.container(classes=["cell_output"] if output else ["cell_input"])
    box += nodes.literal_block(text, text)
    doc += box
    return doc


def test_a_wide_printed_line_is_found_with_its_number():
    found = list(output_width.wide_lines(_page("short\n" + "x" * 101 + "\nshort"), 100))
    assert [(k, len(line)) for _, k, line in found] == [(2, 101)]


def test_narrow_output_and_wide_source_code_pass():
    assert not list(output_width.wide_lines(_page("y" * 100), 100))
    assert not list(output_width.wide_lines(_page("z" * 300, output=False), 100))
