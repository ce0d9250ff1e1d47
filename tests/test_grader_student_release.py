"""``make student-release``: a learner repository with no answer in it that still grades.

The release keeps the references of the chapters released (``CHAPTERS``) and nothing else
that holds an answer: the search below looks for every line that only an answer holds (a line
of a reference body or of a lab answer cell that appears nowhere else in the repository), in
every file of the release, inside notebooks and archives too.
"""

import gzip
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from autograder.tools.student_release import build, chapters, reference_chapter, tracked

ROOT = Path(__file__).resolve().parent.parent
RELEASED = {1}
STUB = 'raise NotImplementedError("Exercise 1.3: strides_from_shape")'
SOLVED = ("out, run = [], 1\n    for n in reversed(shape):\n        out.append(run)\n"
          "        run *= n\n    return tuple(reversed(out))")  # fmt: skip


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    return build(tmp_path_factory.mktemp("student") / "repo", RELEASED)


def _lines(text: str) -> set[str]:
    return {
        t.strip()
        for t in text.splitlines()
        if len(t.strip()) >= 24 and not t.strip().startswith("#")
    }


def answer_lines() -> set[str]:
    """Lines only an unreleased answer holds: in a reference of an unreleased chapter or in an
    answer cell of a source notebook, and in no file the learner is meant to have."""
    answers = set()
    for path in (ROOT / "solutions" / "reference").glob("ch*.py"):
        if reference_chapter(f"solutions/reference/{path.name}") not in RELEASED:
            answers |= _lines(path.read_text())
    for path in (ROOT / "solutions" / "notebooks").glob("*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                answers |= _lines("".join(cell["source"]))
    public = set()
    for rel in tracked():
        if (
            not rel.startswith(("solutions/", "tests/", "autograder/oracle"))
            and (ROOT / rel).is_file()
        ):
            public |= _lines(_text(ROOT / rel, (ROOT / rel).read_bytes()))
        elif reference_chapter(rel) in RELEASED:  # released: the learner may read these
            public |= _lines((ROOT / rel).read_text())
    return answers - public


def _text(path: Path, data: bytes) -> str:
    """What a learner could read in a file: notebooks as their cells, archives unpacked."""
    name = path.name
    if name.endswith(".ipynb"):
        try:
            return "\n".join("".join(c.get("source", "")) for c in json.loads(data)["cells"])
        except (ValueError, KeyError, TypeError):
            pass
    if name.endswith(".gz") and not name.endswith(".tar.gz"):
        return _text(Path(name[:-3]), gzip.decompress(data))
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return "\n".join(_text(Path(n), z.read(n)) for n in z.namelist())
    if name.endswith((".tar", ".tar.gz", ".tgz")):
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            return "\n".join(_text(Path(m.name), t.extractfile(m).read()) for m in t if m.isfile())
    return data.decode("utf-8", errors="replace")


def test_the_release_holds_no_answer(student):
    answers = answer_lines()
    assert len(answers) > 200  # the search looks for something
    leaks = {}
    for path in student.rglob("*"):
        if path.is_file():
            found = answers & _lines(_text(path, path.read_bytes()))
            if found:
                leaks[str(path.relative_to(student))] = sorted(found)[:3]
    assert not leaks, leaks
    assert not (student / "autograder" / "oracle.json.gz").exists()
    assert not (student / "tests").exists()
    assert not list(student.glob("**/vault*")) and not list(student.glob("**/*.pyc"))
    kept = {p.name for p in (student / "solutions" / "reference").glob("*.py")}
    assert kept == {"ch1.py"}


def test_the_release_holds_no_function_of_an_unreleased_answer(student):
    """Issue 41: graded tests computed what they judged with an exercise's own algorithm
    (``test_place._bound`` was 8.2's reference line for line). No function of the release, its
    code or a notebook's, has the body (renamed) or the bytecode of an unreleased exercise's
    reference or of a helper it calls."""
    from tests import answer_prints as ap

    ids = {i for i in ap.exercise_names().values() if int(i.split(".")[0]) not in RELEASED}
    answers: tuple[dict, dict] = ({}, {})
    for ex in ids:
        for mine, theirs in zip(answers, ap.answer_prints(ex)):
            mine.update(theirs)
    assert len(answers[0]) > 100
    leaks = {}
    for path in student.rglob("*"):
        if path.suffix == ".py":
            sources = [path.read_text()]
        elif path.suffix == ".ipynb":  # each code cell, IPython's magics left out
            cells = json.loads(path.read_text())["cells"]
            sources = ["".join(line for line in c["source"] if not line.startswith(("%", "!")))
                       for c in cells if c["cell_type"] == "code"]  # fmt: skip
        else:
            continue
        found = [h for text in sources for h in ap.holds(ap.prints(text, str(path)), answers)]
        if found:
            leaks[str(path.relative_to(student))] = found[:3]
    assert not leaks, leaks


def test_the_release_can_be_made_at_any_point_of_the_term(tmp_path):
    for spec, want in (("", set()), ("1-3,5", {1, 2, 3, 5})):
        assert chapters(spec) == want
        repo = build(tmp_path / (spec or "none"), chapters(spec))
        got = {reference_chapter(p.relative_to(repo).as_posix())
               for p in repo.glob("solutions/reference/*.py")}  # fmt: skip
        assert got == want


def grade(repo: Path, body: str, exercise: str = "1.3") -> dict:
    path = repo / "minitorch/tensor/indexing.py"
    original = path.read_text()
    path.write_text(original.replace(STUB, body))
    try:
        out = repo / "results.json"
        cmd = [sys.executable, "-m", "autograder", "--exercise", exercise, "--json", str(out)]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "NUMBA_ENABLE_CUDASIM": "1"}
        run = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        data = json.loads(out.read_text())
        data["stdout"] = run.stdout
        return data
    finally:
        path.write_text(original)
        shutil.rmtree(repo / "minitorch" / "__pycache__", ignore_errors=True)


def test_the_release_grades(student):
    assert grade(student, SOLVED)["score"] == 2
    assert grade(student, STUB)["score"] == 0


def test_an_unreleased_chapter_runs_the_learners_own_code_and_says_so(student):
    """Chapter 2's exercises need chapter 1's references (released) and their own chapter's
    others (not released: the learner's stubs run, and the report says so)."""
    data = grade(student, STUB, exercise="2.1")
    assert data["extra_data"]["references_missing"] == [2]
    assert "references of chapter(s) [2] are not in this repository" in data["stdout"]


def test_every_make_target_the_release_offers_can_run_there(student):
    """The learner's Makefile keeps only what works without references and tests: every target
    its help names has a rule, and none of them reads solutions/ or tests/."""
    makefile = (student / "Makefile").read_text()
    assert "instructors:" not in makefile and "solutions/" not in makefile
    help_ = subprocess.run(["make", "-s", "help"], cwd=student, capture_output=True, text=True)
    targets = [line.split()[1] for line in help_.stdout.splitlines() if line.startswith("make ")]
    assert targets and "grade" in targets and "check-solutions" not in targets
    for target in targets:
        dry = subprocess.run(["make", "-n", target], cwd=student, capture_output=True, text=True)
        assert dry.returncode == 0, (target, dry.stderr)
        assert "tests." not in dry.stdout and "--solutions" not in dry.stdout, (target, dry.stdout)
    dry = subprocess.run(["make", "-n", "check-solutions"], cwd=student, capture_output=True)
    assert dry.returncode != 0
