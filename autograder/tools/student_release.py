"""``python -m autograder.student_release`` (``make student-release``): the learner repository.

Every tracked file except ``solutions/`` (the references and the source
notebooks with their answers), which go into ``autograder/vault.zip`` for the
grader. ``make grade`` works there unchanged; the references are not
importable by learner code (``isolated`` mode outside the grader therefore
needs the earlier exercises done, or ``learner`` mode).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from .manifest import ROOT
from .vault import write_vault


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line]


def build(dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    for rel in tracked():
        if rel.startswith("solutions/") or not (ROOT / rel).is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    write_vault(dest / "autograder" / "vault.zip")
    return dest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "build" / "student")
    args = p.parse_args(argv)
    print(f"wrote the learner repository to {build(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
