"""``python -m autograder.tools.gradescope`` (``make gradescope``): the Gradescope autograder zip.

The zip holds ``setup.sh`` (once per image: a Python 3.11+, the pinned
requirements in ``/autograder/venv``, the grading users), ``run_autograder``
(per submission) and ``source/``: the grader, its tests, the references, the
oracle and the course's own package (benchmark baselines run on it).
``run_autograder`` deletes any ``results.json`` first, finds the uploaded
``minitorch/`` (and ``exercises/``) and runs official grading
(``python -m autograder --official``): learner code, labs included, runs as
the run's own grading user in a world of its own (``autograder/grader/sandbox.py``),
and only the grader writes ``/autograder/results/results.json``, once every child
is dead. ``AUTOGRADER_ROOT`` and ``PYTHON`` replace ``/autograder`` and its
venv to try it in a local tree (``tests/test_grader_gradescope.py``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import zipfile
from pathlib import Path

from .. import config

ROOT = config.ROOT
SOURCES = [
    "minitorch",
    "autograder",
    "solutions",
    "exercises",
    "pyproject.toml",
    "requirements.txt",
]

SETUP = f"""\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the image.
set -euo pipefail
cd /autograder/source
PY=""
for v in python3.13 python3.12 python3.11; do
  if command -v "$v" > /dev/null; then PY=$(command -v "$v"); break; fi
done
if [ -z "$PY" ]; then  # the package needs Python 3.11 or newer
  apt-get update -qq
  apt-get install -y -qq python3.11 python3.11-venv > /dev/null \\
    || {{ apt-get install -y -qq software-properties-common > /dev/null \\
          && add-apt-repository -y ppa:deadsnakes/ppa && apt-get update -qq \\
          && apt-get install -y -qq python3.11 python3.11-venv > /dev/null; }}
  PY=$(command -v python3.11)
fi
"$PY" -c 'import sys; assert sys.version_info >= (3, 11), sys.version'
"$PY" -m venv /autograder/venv 2> /dev/null || {{
  apt-get update -qq && apt-get install -y -qq "$(basename "$PY")-venv" > /dev/null
  "$PY" -m venv /autograder/venv; }}
/autograder/venv/bin/pip install -q --upgrade pip
/autograder/venv/bin/pip install -q -r requirements.txt
# Learner code runs as one of these users, a user per grading running at once (official
# grading creates a missing one, or refuses where it cannot).
for n in $(seq 0 {config.GRADER_USERS - 1}); do
  id -u {config.GRADER_USER}-$n > /dev/null 2>&1 || useradd --system --user-group \\
    --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin {config.GRADER_USER}-$n
done
chmod -R go-rwx /autograder/source
"""

RUN = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission, as root. AUTOGRADER_ROOT and PYTHON let it run
# in a local tree.
set -uo pipefail
AG="${AUTOGRADER_ROOT:-/autograder}"
PY="${PYTHON:-$AG/venv/bin/python}"
OUT="$AG/results/results.json"
mkdir -p "$AG/results"
rm -f "$OUT"  # whatever is there did not come from this grader
fail() { printf '{"score": 0, "output": "%s", "tests": []}\\n' "$1" > "$OUT"; exit 0; }
# The submission is the learner's repository (or a zip of it): find its minitorch/.
found=$(find "$AG/submission" -maxdepth 3 -path '*/minitorch/__init__.py' -not -path '*/.venv/*' | head -1)
[ -n "$found" ] || fail "No minitorch/ folder found in the submission."
SUBROOT=$(dirname "$(dirname "$found")")
cd "$AG/source" || fail "The autograder is not installed."
"$PY" -m autograder --official --submission "$SUBROOT" --json "$OUT" ${AUTOGRADER_ARGS:-}
test -s "$OUT" || fail "The grader failed to run."
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
