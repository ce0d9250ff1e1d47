"""``python -m autograder.gradescope``: the Gradescope autograder zip (``make gradescope``).

The zip holds ``setup.sh`` (installs the pinned requirements), ``run_autograder``
and ``source/``: the grader, its tests, the references and a clean copy of the
framework. ``run_autograder`` grades the uploaded ``minitorch/`` (and
``exercises/``) with the same machinery as ``make grade`` and writes
``/autograder/results/results.json``. In the container the learner's code runs
as ``nobody`` and the references' own folder is readable by root only, so the
reference of the exercise being graded is out of reach (see CONTRIBUTING.md).
``AUTOGRADER_ROOT`` replaces ``/autograder`` to try it in a local tree.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import zipfile
from pathlib import Path

from .manifest import ROOT

SOURCES = [
    "minitorch",
    "autograder",
    "solutions",
    "exercises",
    "pyproject.toml",
    "requirements.txt",
]

SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once when it builds the image (Ubuntu, Python 3.10+).
set -euo pipefail
cd /autograder/source
apt-get update -qq && apt-get install -y -qq python3-pip python3-venv > /dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q -r requirements.txt
/autograder/venv/bin/pip install -q --no-deps --no-build-isolation -e .
"""

RUN = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT and PYTHON let it run locally.
set -uo pipefail
AG="${AUTOGRADER_ROOT:-/autograder}"
PY="${PYTHON:-$AG/venv/bin/python}"
SUB="$AG/submission"
# The submission is the learner's repository (or a zip of it): find its minitorch/.
found=$(find "$SUB" -maxdepth 3 -path '*/minitorch/__init__.py' -not -path '*/.venv/*' | head -1)
mkdir -p "$AG/results"
if [ -z "$found" ]; then
  echo '{"score": 0, "output": "No minitorch/ folder found in the submission.", "tests": []}' \\
    > "$AG/results/results.json"
  exit 0
fi
SUBROOT=$(dirname "$(dirname "$found")")
cd "$AG/source"
if [ "$(id -u)" = 0 ]; then
  chmod -R go-rwx "$AG/source/solutions"   # learner code runs as nobody: no references
  export AUTOGRADER_CHILD_USER="${AUTOGRADER_CHILD_USER-nobody}"  # empty: stay root
fi
export NUMBA_ENABLE_CUDASIM=1
"$PY" -m autograder --submission "$SUBROOT" --json "$AG/results/results.json" ${AUTOGRADER_ARGS:-}
status=$?
test -s "$AG/results/results.json" || echo '{"score": 0, "output": "The grader failed to run.", "tests": []}' > "$AG/results/results.json"
exit $status
"""


def build(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.nbi", "*.nbc")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, text)
        for name in SOURCES:
            path = ROOT / name
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            for f in files:
                rel = f.relative_to(ROOT)
                if not ignore(str(f.parent), [f.name]) and "__pycache__" not in rel.parts:
                    z.write(f, Path("source") / rel)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "build" / "gradescope.zip")
    args = p.parse_args(argv)
    print(f"wrote {build(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
