"""``make student-release [CHAPTERS=1-4]``: the learner repository, with no answer in it.

Every tracked file, except what holds answers:

* ``solutions/``: the references and the answered source notebooks. Only the
  references of the chapters named in ``CHAPTERS`` (released once their work
  is due) are kept, as plain files, so that isolated grading can use them;
* ``autograder/oracle.json.gz``: the references' recorded comparisons (their
  values are answers); local grading judges without it;
* ``tests/``: the project's own tests, among them correct variants and
  near-correct mutants of every exercise.

The ``Makefile`` loses its instructors' blocks (from ``# instructors: begin`` to
``# instructors: end``): those targets need the references or the project's
tests, so in the release they could only fail.

The released lab notebooks (``exercises/``, no answers) are also kept under
``autograder/labs/``, where the grader reads the test cells from (the learner
edits ``exercises/``), and ``autograder/hashes.json`` is written for what the
release holds. In isolated grading an exercise whose reference is not
released runs the learner's own code, and the report says so.
``tests/test_grader_student_release.py`` searches the release, inside
notebooks and archives too, for every line only an answer holds.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..config import ROOT

WITHHELD = ("solutions/", "tests/", "autograder/oracle.json.gz")


def chapters(spec: str | None) -> set[int]:
    """``"1-4,6"`` -> {1, 2, 3, 4, 6}."""
    found: set[int] = set()
    for part in filter(None, (spec or "").replace(" ", "").split(",")):
        low, _, high = part.partition("-")
        found |= set(range(int(low), int(high or low) + 1))
    return found


def reference_chapter(rel: str) -> int | None:
    """The chapter of ``solutions/reference/chC[_x].py``, else None."""
    m = re.fullmatch(r"solutions/reference/ch(\d+)(?:_\w+)?\.py", rel)
    return int(m[1]) if m else None


def learner_makefile(text: str) -> str:
    """The Makefile without its instructors' blocks."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("# instructors: begin"):
            skipping = True
        elif line.startswith("# instructors: end"):
            skipping = False
        elif not skipping:
            out.append(line)
    return "".join(out)


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line]


def build(dest: Path, released: set[int] = frozenset()) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    for rel in tracked():
        keep = not rel.startswith(WITHHELD) or rel == "solutions/__init__.py"
        keep = keep or reference_chapter(rel) in released
        if keep and (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    (dest / "Makefile").write_text(learner_makefile((ROOT / "Makefile").read_text()))
    if not any(
        reference_chapter(p.relative_to(dest).as_posix())
        for p in dest.glob("solutions/reference/*.py")
    ):
        shutil.rmtree(dest / "solutions", ignore_errors=True)
    labs = dest / "autograder" / "labs"
    labs.mkdir(parents=True, exist_ok=True)
    for nb in sorted((ROOT / "exercises").glob("ch*.ipynb")):
        shutil.copy2(nb, labs / nb.name)
    subprocess.run([sys.executable, "-m", "autograder.tools.integrity", "--write"], cwd=dest,
                   check=True, capture_output=True)  # fmt: skip
    return dest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "build" / "student")
    p.add_argument("--chapters", help="chapters whose references are released, e.g. 1-4")
    args = p.parse_args(argv)
    released = chapters(args.chapters)
    print(f"wrote the learner repository to {build(args.out, released)} "
          f"(references released: {sorted(released) or 'none'})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
