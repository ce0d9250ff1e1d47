"""The grader's private files (references, source notebooks): from the repository, or from
``autograder/vault.zip`` in a learner repository made by ``make student-release``.

The vault is not a package: ``import solutions.reference`` fails in a student
repository, and the grader writes the references into each grading tree
itself (withholding the one being graded). It is a zip, not a secret: a
learner who unpacks it reads the references (see CONTRIBUTING.md).
"""

from __future__ import annotations

import fnmatch
import zipfile
from pathlib import Path

from .manifest import ROOT

VAULT = ROOT / "autograder" / "vault.zip"
PRIVATE = ("solutions/__init__.py", "solutions/reference/*.py", "solutions/notebooks/*.ipynb")


def names(pattern: str) -> list[str]:
    """Repository-relative paths matching ``pattern``, on disk or in the vault."""
    found = {p.relative_to(ROOT).as_posix() for p in ROOT.glob(pattern) if p.is_file()}
    if not found and VAULT.exists():
        with zipfile.ZipFile(VAULT) as z:
            found = {n for n in z.namelist() if fnmatch.fnmatch(n, pattern)}
    return sorted(found)


def read(rel: str) -> bytes:
    path = ROOT / rel
    if path.is_file():
        return path.read_bytes()
    with zipfile.ZipFile(VAULT) as z:
        return z.read(rel)


def extract(pattern: str, dest: Path) -> list[Path]:
    """Write the files matching ``pattern`` under ``dest`` (same relative paths)."""
    out = []
    for rel in names(pattern):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read(rel))
        out.append(target)
    return out


def write_vault(dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for pattern in PRIVATE:
            for rel in names(pattern):
                z.writestr(rel, read(rel))
    return dest
