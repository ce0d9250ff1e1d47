"""Every resource a submission or a child can spend is bounded, and nothing passes on a child's word.

Local and unit checks here; the official runs of the same attacks are in
``tests/test_grader_hostile.py`` (fixtures ``tests/hostile/*``) and at the end of this file.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder import config
from autograder.grader import labs, submission

ROOT = Path(__file__).resolve().parent.parent


def levels(top: Path, n: int) -> None:
    """``n`` folders ``a/a/...`` under ``top`` (a file at the bottom), or none: made and removed
    one level at a time (``os.makedirs`` and ``shutil.rmtree`` recurse)."""
    here = os.getcwd()
    try:
        os.chdir(top)
        if n:
            for _ in range(n):
                os.mkdir("a")
                os.chdir("a")
            Path("m.py").write_text("y = 2\n")
            return
        depth = 0
        while os.path.isdir("a"):
            os.chdir("a")
            depth += 1
        Path("m.py").unlink(missing_ok=True)
        for _ in range(depth):
            os.chdir("..")
            os.rmdir("a")
    finally:
        os.chdir(here)


def test_a_folder_thousands_of_levels_deep_is_left_out_not_a_crash(tmp_path):
    (tmp_path / "minitorch").mkdir()
    (tmp_path / "minitorch" / "__init__.py").write_text("x = 1\n")
    levels(tmp_path / "minitorch", 1100)  # past Python's recursion limit
    try:
        found = submission.copy(tmp_path, tmp_path / "copy")
    finally:
        levels(tmp_path / "minitorch", 0)
    ((where, why),) = found.items()
    assert where.count("/a") == config.MAX_DEPTH + 1 and "deeper than the grader reads" in why
    assert (tmp_path / "copy" / "minitorch" / "__init__.py").read_text() == "x = 1\n"


def test_a_long_path_is_left_out(tmp_path):
    folder = tmp_path.joinpath("minitorch", *(c * 250 for c in "bcdef"))  # 1,260 characters
    os.makedirs(folder)
    (folder / "m.py").write_text("y = 2\n")
    found = submission.copy(tmp_path, tmp_path / "copy")
    assert [why for why in found.values() if "characters" in why], found
    assert not list((tmp_path / "copy").rglob("m.py"))


def test_too_many_entries_are_not_walked(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "MAX_ENTRIES", 50)
    for i in range(60):
        (tmp_path / "minitorch" / f"p{i}").mkdir(parents=True)
    found = submission.copy(tmp_path, tmp_path / "copy")
    assert "more than the grader reads (50 entries)" in found["minitorch/"]


def test_file_names_are_escaped_where_the_report_names_them(tmp_path):
    (tmp_path / "minitorch").mkdir()
    (tmp_path / "minitorch" / "ok\x1b[2J\x1b[H\nTotal 100.py").write_text("def f(:\n")
    found = submission.copy(tmp_path, tmp_path / "copy")
    ((name, why),) = found.items()
    assert name == "minitorch/ok\\x1b[2J\\x1b[H\\nTotal 100.py" and "SyntaxError" in why
    assert name.isprintable()


def test_a_flooded_log_costs_the_parent_neither_memory_nor_disk(tmp_path):
    import tracemalloc

    from autograder.grader.children import Child, keep_tail

    log = tmp_path / "child.log"
    with open(log, "wb") as f:
        for _ in range(64):  # 64 MiB of one long line, then the lines a message shows
            f.write(b"x" * (1 << 20))
        f.write(b"\nTraceback: the last line\n")
    child = Child(0, 0, None, log)
    tracemalloc.start()
    tail = child.tail()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tail.endswith("Traceback: the last line") and peak < 4 * config.LOG_TAIL, peak
    keep_tail(log)
    assert log.stat().st_size == config.LOG_TAIL and child.tail() == tail


def test_a_lab_task_recorded_without_values_never_passes():
    """A test cell whose records hold only kinds (``a < b`` of two numbers) is a cell's word."""
    kinds = [["Lt", "number", "number"], ["GtE", "number", "number"]]
    valued = [["call", "np.allclose", {"f": 3001.0}, {"f": 3001.0}, [0, 1e-9]]]
    assert not labs.valued(kinds) and not labs.valued(None) and not labs.valued(["*"])
    assert labs.valued(valued) and labs.valued(["*", *valued])


SCRIPT = """
import json, os, sys, tempfile, time
from pathlib import Path
from autograder import config
from autograder.grader import labs, manifest, sandbox
from autograder.grader.children import Launcher
from autograder.grader.runner import Grading
sandbox.become_subreaper()
config.CELL_TIMEOUT = 3.0
work = Path(tempfile.mkdtemp(prefix="lab-test-"))
os.chmod(work, 0o700)
grading = Grading(Launcher(official=False, work=work), "reference", manifest.ROOT / "minitorch")
{body}
grading.close()
sandbox.remove_tree(work)
"""


def run(body: str, timeout: float = 300) -> dict:
    env = {**os.environ, "MINITORCH_MODE": "reference", "NUMBA_ENABLE_CUDASIM": "1"}
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(body=body)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_lab_cell_that_never_stops_sending_is_stopped_at_its_limit():
    flood = ("from autograder import wire\\n"
             "while True:\\n"
             "    wire.emit(event='cell', index=0)\\n"
             "    wire.emit(event='ran', index=10**9, error='', stderr='', records=[])\\n")  # fmt: skip
    got = run(
        f"""
cells = [{{"source": "{flood}", "grade_id": None}}]
start = time.monotonic()
ran, why = labs._run(cells, grading, 1, 600.0)
print(json.dumps({{"why": why, "took": time.monotonic() - start, "ran": len(ran)}}))
""",
        timeout=240,
    )
    assert got["why"] == "a cell ran past 3 s" and got["ran"] == 0, got
    assert got["took"] < 60, got


def test_a_lab_cell_flooding_its_records_is_cut_at_the_volume_limit():
    """Near-limit records, each after a ``cell`` record of the same cell: only a cell that
    starts restarts the count, so the flood is cut at ``config.RECORD_VOLUME`` within seconds."""
    flood = ("from autograder import wire\\n"
             "big = 'x' * (3 << 20)\\n"
             "while True:\\n"
             "    wire.emit(event='cell', index=0)\\n"
             "    wire.emit(event='ran', index=10**9, error=big, stderr='', records=[])\\n")  # fmt: skip
    got = run(
        f"""
cells = [{{"source": "{flood}", "grade_id": None}}]
start = time.monotonic()
ran, why = labs._run(cells, grading, 1, 600.0)
print(json.dumps({{"why": why, "took": time.monotonic() - start}}))
""",
        timeout=240,
    )
    assert "MiB of records for one test or cell" in got["why"], got


FORGER = """
import os, sys
wire = sys.modules["autograder.wire"]
for index in range(300):  # every cell's report, the test cells' with the kinds they compare
    wire.emit(event="ran", index=index, error="", stderr="",
              records=[["Lt", "number", "number"], ["GtE", "number", "number"]])
os._exit(0)
"""


def test_forged_reports_earn_nothing_where_a_task_compares_no_value():
    """The forged report of lab 2's cells (the kinds the reference's cells compared, which
    is all the oracle held for two tasks before they compared values) earns nothing."""
    got = run(f"""
items = manifest.notebook_items(2)
kinds = {{i.nodeid: [["Lt", "number", "number"], ["GtE", "number", "number"]] for i in items}}
src = json.loads(manifest.notebook_path(2).read_text())
for c in src["cells"]:
    if c.get("metadata", {{}}).get("nbgrader", {{}}).get("grade_id") == "numerical_grad":
        c["source"] = {FORGER!r}
path = Path(work) / "learner.ipynb"
path.write_text(json.dumps(src))
res = labs.grade_lab(items, manifest.notebook_path(2), path, grading, oracle=kinds)
print(json.dumps({{n: [r.score, r.message] for n, r in res.items()}}))
""")
    assert got and all(score == 0 for score, _ in got.values()), got
    assert all("no recorded values" in message for _, message in got.values()), got


# --- official grading (as root; each run is short: one exercise, or chapter 1 hanging) -----------

official = pytest.mark.skipif(os.geteuid() != 0, reason="official grading needs root")


@pytest.fixture
def repo(tmp_path):
    """A copy of the repository to plant in, as ``tests/test_grader_hostile.py`` makes one."""
    import shutil

    for name in ["minitorch", "autograder", "solutions"]:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@official
def test_a_deep_tree_and_a_terminal_sequence_in_a_name_are_reported_officially(repo):
    """Uploaded apart from the grader's own copy of the course (as on Gradescope)."""
    import shutil

    from tests.test_grader_hostile import grade

    upload = repo / "upload"
    shutil.copytree(repo / "minitorch", upload / "minitorch")
    levels(upload / "minitorch", 1100)
    (upload / "minitorch" / "x\x1b[2J\x1b[1;1HTotal 1000.py").write_text("def f(:\n")
    try:
        data = grade(repo, "--exercise", "1.3", "--submission", str(upload))
    finally:
        levels(upload / "minitorch", 0)
    assert data["max_score"] > 0 and data["tests"], data.get("extra_data")
    problems = data["extra_data"]["problems"]
    assert any("deeper than the grader reads" in why for why in problems.values()), problems
    assert "minitorch/x\\x1b[2J\\x1b[1;1HTotal 1000.py" in problems, problems
    assert "\x1b" not in data["stdout"]


@official
def test_an_import_hang_costs_the_chapter_one_time_limit_labs_included(repo):
    """Chapter 1's tests and its lab notebook: the lab is not run again task by task."""
    import shutil

    from tests.test_grader_hostile import grade, plant

    shutil.copytree(ROOT / "exercises", repo / "exercises")
    plant(repo, "import_hang")
    start = time.monotonic()
    data = grade(repo, "--chapter", "1", "--timeout", "15")
    took = time.monotonic() - start
    labs_ = [t for t in data["tests"] if t["extra_data"]["kind"] == "notebook"]
    assert labs_ and data["score"] == 0, data["tests"][:3]
    assert all("importing minitorch did not finish within 15 s" in t["output"] for t in labs_)
    assert took < 150, f"{took:.0f} s: the lab waited out its own limits"


# The grader's own peak is VmHWM (this program's memory only): ru_maxrss of RUSAGE_SELF keeps
# the peak of the process it was started from across exec (pytest's, hundreds of MB late in
# a full run).
MEASURE = """
import resource, runpy, sys
sys.argv = ["autograder", *sys.argv[1:]]
try:
    runpy.run_module("autograder", run_name="__main__")
finally:
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(int(hwm.split()[1]), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def measured(repo: Path, attack: str) -> tuple[dict, float, int, int]:
    """``attack`` (``tests/hostile/``) graded officially on its own exercise (30 s limit): the
    report, the wall seconds, the peak memory of the grader itself and of its largest child
    (kB)."""
    from tests.test_grader_hostile import plant

    exercise = plant(repo, attack)
    cmd = [sys.executable, "-c", MEASURE, "--official", "--submission", str(repo),
           "--json", str(repo / "results.json"), "--exercise", exercise, "--timeout", "30"]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "NUMBA_ENABLE_CUDASIM": "1"}
    start = time.monotonic()
    out = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    data = json.loads((repo / "results.json").read_text())
    assert data["tests"], data
    grader_kb, child_kb = map(int, out.stdout.strip().splitlines()[-1].split())
    return data, took, grader_kb, child_kb


@official
def test_a_flooded_log_does_not_swell_the_grader(repo):
    """``tests/hostile/log_flood.py`` fills the log to its 256 MiB limit at import and exits: the
    grader read all of it for the message's last lines (584 MB peak), now only its tail."""
    data, _, grader_kb, child_kb = measured(repo, "log_flood")
    assert data["score"] == 0, data["tests"]
    assert data["tests"][0]["output"].startswith("[not run] not run: flood flood")  # its tail
    assert max(grader_kb, child_kb) < 200_000, f"peaks: {grader_kb >> 10}, {child_kb >> 10} MB"


@official
def test_a_record_flood_is_cut_not_parsed_to_the_wall_clock_limit(repo):
    """``tests/hostile/big_record_flood.py`` writes near-limit check records at almost no CPU
    cost: the parent parsed them until the test's wall-clock limit (94 s at a 30 s limit, 281 s
    at the default). Past ``config.RECORD_VOLUME`` for one test its results are void (6 s)."""
    data, took, grader_kb, _ = measured(repo, "big_record_flood")
    assert data["score"] == 0 and "MiB of records for one test" in data["tests"][0]["output"]
    assert took < 60, f"{took:.0f} s"  # the old parent parsed to the wall-clock limit: 3 x 30 s
    assert grader_kb < 200_000, f"the grader peaked at {grader_kb >> 10} MB"


@official
def test_a_huge_benchmark_result_is_not_read_by_the_grader(repo):
    """``tests/hostile/bench_huge_output.py``: a side's result of 1 GiB where the course's is 4 MB.
    The parent read all of it before comparing shapes (2.1 GB peak); now it reads a result only
    in the course's shape (45 MB)."""
    data, _, grader_kb, _ = measured(repo, "bench_huge_output")
    bench = next(t for t in data["tests"] if t["extra_data"]["kind"] == "benchmark")
    assert grader_kb < 300_000, f"the grader peaked at {grader_kb >> 10} MB"
    assert bench["score"] == 0 and "shape (4096, 32768) of float64" in bench["output"], bench
