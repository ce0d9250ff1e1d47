"""Run a lab notebook the grader prepared, cell by cell, in this process (the child's side).

The parent writes the notebook to run into the grading tree (``lab.json``: the
learner's answer cells with the course's locked and test cells, see
``autograder/grader/labs.py``). This runs its code cells in order in an
IPython shell (what a Jupyter kernel runs, without the kernel's processes and
sockets) and reports each cell to the parent: whether it raised, what it
wrote to stderr, and the comparison records a test cell printed
(``autograder.labkernel``). The parent decides, as nbgrader does: a test cell
earns its points when it raised nothing and wrote nothing to stderr, and here
also only when its records agree with the reference notebook's.
"""

from __future__ import annotations

import contextlib
import io
import json
import os

from . import config, wire
from .labkernel import MARK


def _records(text: str) -> list:
    out = []
    for line in text.split("\n"):  # not splitlines(): it splits at the mark too
        if line.startswith(MARK) and len(out) < config.LAB_RECORDS:
            try:
                out.append(json.loads(line[len(MARK) :]))
            except (ValueError, RecursionError):
                out.append(["unreadable"])
    return out


def run(path: str) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    from IPython.core.interactiveshell import InteractiveShell

    cells = json.loads(open(path, encoding="utf-8").read())["cells"]
    shell = InteractiveShell.instance(colors="NoColor")
    for index, cell in enumerate(cells):
        wire.emit(event="cell", index=index)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result = shell.run_cell(cell["source"], store_history=False, silent=False)
        failure = result.error_before_exec or result.error_in_exec
        error = f"{type(failure).__name__}: {failure}".strip() if failure is not None else ""
        wire.emit(event="ran", index=index, error=error[:1500],
                  stderr=err.getvalue().strip()[:500], records=_records(out.getvalue()))  # fmt: skip
