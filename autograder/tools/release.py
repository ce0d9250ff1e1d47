"""``python -m autograder.tools.release``: regenerate exercises/ from solutions/notebooks/ with nbgrader.

``--check`` regenerates into a temporary folder and fails when the committed
``exercises/`` differ (run ``make release`` and commit the result).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..config import ROOT
from ..grader.manifest import NOTEBOOKS

EXERCISES = ROOT / "exercises"


def _api(root: Path):
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.course_id = "minitorch"
    c.Exchange.root = str(root / "exchange")
    return NbGraderAPI(config=c)


def release(source: Path, dest: Path) -> Path:
    """Write the learner's version of ``source`` (solutions stripped) to ``dest/``."""
    with tempfile.TemporaryDirectory(prefix="nbgrader-") as tmp:
        root = Path(tmp)
        (root / "source" / source.stem).mkdir(parents=True)
        shutil.copy(source, root / "source" / source.stem / source.name)
        # nbgrader shells out to `alembic`, which lives next to this Python.
        os.environ["PATH"] = (
            str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
        )
        result = _api(root).generate_assignment(source.stem, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(
                f"nbgrader could not generate {source.name}:\n{result['log'][-2000:]}"
            )
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / "release" / source.stem / source.name, dest / source.name)
    return dest / source.name


def _normal(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell.pop("id", None)
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when exercises/ is out of date")
    args = parser.parse_args(argv)
    sources = sorted(NOTEBOOKS.glob("ch*.ipynb"))
    if not args.check:
        for src in sources:
            print(f"released {release(src, EXERCISES).relative_to(EXERCISES.parent)}")
        return 0
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        for src in sources:
            fresh = release(src, Path(tmp))
            committed = EXERCISES / src.name
            if not committed.exists() or _normal(fresh) != _normal(committed):
                stale.append(committed.name)
    extra = {p.name for p in EXERCISES.glob("*.ipynb")} - {s.name for s in sources}
    for name in stale:
        print(
            f"exercises/{name} differs from what `make release` produces from solutions/notebooks/"
        )
    for name in sorted(extra):
        print(f"exercises/{name} has no source notebook in solutions/notebooks/")
    if stale or extra:
        print("Run `make release` and commit exercises/.")
        return 1
    print(f"exercises/ is in sync with {len(sources)} source notebook(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
