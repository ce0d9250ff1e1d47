"""The grader's checks on its own files and on the records it reads; the world an official child
lives in (root only: it gives learner code another user); the processes it leaves."""

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder.grader import sandbox
from autograder.grader.manifest import Item
from autograder.grader.protocol import Forged, Result, band_fraction, clean, parse, score
from autograder.grader.runner import gate_benchmarks
from autograder.tools import integrity

NODE = "autograder/tests/ch1/test_indexing.py::test_strides_from_shape"
BENCH = Item("autograder/tests/ch1/bench_ch1.py::bench_x", "1.3", 2, "benchmark", "speedup",
             [(8, 1.0), (3, 0.5)], formula="slow / fast")  # fmt: skip
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="official grading needs root")


def test_hashes_json_is_current():
    assert integrity.problems() == [], "run `make hashes` and commit autograder/hashes.json"


def line(**record) -> bytes:
    return json.dumps(record).encode()


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        line(event="result", nodeid=[1], outcome="passed", duration=1),
        line(event="result", nodeid="other::test", outcome="passed", duration=1),
        line(event="result", nodeid=NODE, outcome="xpassed", duration=1),
        line(event="result", nodeid=NODE, outcome="passed", duration=float("nan")),
        line(event="result", nodeid=NODE, outcome="passed", duration=1, fraction=4039),
        line(event="result", nodeid=NODE, outcome="passed", duration=1, figures={"s": "1e9"}),
        line(event="result", nodeid=NODE, outcome="passed", duration=1, message=["x"]),
        line(event="start", nodeid=NODE, outcome="passed"),
        line(event="grade", score=999),
    ],
)
def test_records_outside_the_schema_are_forged(raw):
    with pytest.raises(Forged):
        parse(raw, {NODE})


def test_a_benchmark_figure_is_the_parents_never_the_childs():
    ev = {"outcome": "passed", "duration": 1.0, "figures": {"speedup": 1e9}}
    assert score(BENCH, ev, figure=4.0).score == 1  # the child's 1e9 is ignored
    assert score(BENCH, ev, figure=20.0).score == 2
    not_timed = score(BENCH, ev, figure=None, why="the benchmark stopped while being timed")
    assert not_timed.score == 0 and "stopped while being timed" in not_timed.message
    assert band_fraction(5, [(1, 4039.0)]) == 1.0 and band_fraction(5, [(1, -3)]) == 0.0


def test_benchmark_points_need_the_exercises_tests():
    test = Item(NODE, "1.3", 2)
    results = {BENCH.nodeid: Result(BENCH, "passed", 2.0), NODE: Result(test, "failed")}
    gated = gate_benchmarks(results)
    assert gated[BENCH.nodeid].score == 0 and "tests pass" in gated[BENCH.nodeid].message
    results = {BENCH.nodeid: Result(BENCH, "passed", 2.0), NODE: Result(test, "passed", 2.0)}
    assert gate_benchmarks(results)[BENCH.nodeid].score == 2


def test_learner_text_is_cut_and_its_control_characters_escaped():
    assert len(Result(BENCH, "failed", message="x" * 10**6).message) < 2100
    shown = Result(BENCH, "failed", message="a\x1b[2J\x1b[32mTotal: 999\rb\u202ec\n\td").message
    assert "\x1b" not in shown and "\r" not in shown and "\u202e" not in shown
    assert "\\x1b[2J" in shown and "\n\td" in shown
    assert clean("é → ok", 100) == "é → ok"


MODULE = """from minitorch import thing


def _shared(x):
    return x + 1


def _only_mine(x):
    return _shared(x) * 2


def mine(x):
    \"\"\"Doc.\"\"\"
    return _only_mine(x) + other(x)


def other(x):
    return _shared(x) - 1


def third(x):
    return mine(x) + 3
"""


def test_withholding_deletes_the_answer_and_every_helper_it_reaches():
    """Issue 41: only the graded function's body was withheld, so a stub importing its
    helpers (``ch8._place``) earned full marks. Now its helpers go too; ``other`` used a
    deleted helper: it runs the learner's code; ``mine``, the answer, refuses."""
    stubs = {"mine": "9.1", "other": "9.2", "third": "9.3"}
    out, bound = sandbox.withhold(MODULE, "9.1", stubs)
    assert bound == {"9.1", "9.2"}
    assert "_shared" not in out and "_only_mine" not in out and "def mine(x)" not in out
    assert "def third(x):\n    return mine(x) + 3" in out
    assert "other = _REGISTRY['9.2'].stub" in out
    refusal = out[out.index("def mine(*args") : out.index("\n\n\n# they used")]
    with pytest.raises(NotImplementedError, match="Exercise 9.1 is withheld"):
        exec(refusal + "\nmine(1)\n", {})
    out, bound = sandbox.withhold(MODULE, "9.3", stubs)  # it owns no helper: the rest stays
    assert bound == {"9.3"} and "def third(x)" not in out
    assert out.startswith(MODULE[: MODULE.index("def third")])


def test_a_graded_exercises_helpers_cannot_be_imported_in_its_tree(tmp_path):
    """The issue's attack on 8.4: ``from solutions.reference.ch8 import _place, align``.
    In 8.4's tree ``_place`` is gone; 8.5 (which used it) runs the learner's code; the
    other exercises' references (8.3's ``align``) are there."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    tree = sandbox.build_tree(package, True, sandbox.Withheld.answer("8.4"), dest=tmp_path / "t")
    ch8 = (tree / "solutions/reference/ch8.py").read_text()
    assert "def _place" not in ch8 and "def first_fit" not in ch8
    assert "def greedy_by_size(buffers" not in ch8
    assert "def align" in ch8 and "def place_buffers" in ch8
    assert "def greedy_by_size(*args, **kwargs):\n    raise NotImplementedError(" in ch8
    assert "first_fit = _REGISTRY['8.5'].stub" in ch8
    passes = sandbox.build_tree(package, True, sandbox.Withheld.answer("6.11"), dest=tmp_path / "p")
    ch6 = (passes / "solutions/reference/ch6.py").read_text()
    assert "_more_patterns" not in ch6 and "_round_trip" not in ch6  # 6.11's one-line stub
    sandbox.remove_tree(passes)
    codegen = sandbox.build_tree(package, True, sandbox.Withheld.answer("7.6"), dest=tmp_path / "u")
    assert (
        "def loop_strides(shape" not in (codegen / "solutions/reference/ch7_codegen.py").read_text()
    )
    sandbox.remove_tree(tree)
    sandbox.remove_tree(codegen)


def test_only_these_pairs_share_an_answers_helper():
    """Which references go with another exercise's answer (the report names them). None of
    these pairs' graded tests calls the other exercise of its pair: 8.4/8.5 (one planner),
    11.11/11.12 (a finiteness check), 11.17/11.18 (one merge), 12.3/12.5 (the flat buffer)."""
    names = sandbox.Withheld.names_of()
    shared = {i: sandbox.shared_with(i, names) for _, i in names}
    pairs = [("8.4", "8.5"), ("11.11", "11.12"), ("11.17", "11.18"), ("12.3", "12.5")]
    want = {a: {b} for a, b in pairs} | {b: {a} for a, b in pairs}
    assert {i: s for i, s in shared.items() if s} == want


def test_no_grading_tree_holds_the_answer_it_grades(tmp_path):
    """Every exercise's tree, every file a child can import (the references left, the graded
    tests, the child side of the grader): no function whose body, renamed, or bytecode is the
    exercise's reference or a helper it reaches."""
    from tests import answer_prints as ap

    package = tmp_path / "package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    names = sandbox.Withheld.names_of()
    ids = sorted({i for _, i in names})
    assert len(ids) > 100
    seen, found = {}, {}
    for ex in ids:
        answer = ap.answer_prints(ex)
        assert answer[0], ex  # something to look for
        tree = sandbox.build_tree(package, True, sandbox.Withheld(exercise=ex, names=names),
                                  dest=tmp_path / ex)  # fmt: skip
        for path in tree.rglob("*"):
            assert path.suffix not in (".pyc", ".nbi", ".nbc"), path  # no bytecode to read
            if path.suffix == ".py":
                text = path.read_text()
                if text not in seen:
                    seen[text] = ap.prints(text, str(path))
                hits = ap.holds(seen[text], answer)
                if hits:
                    found[f"{ex} {path.relative_to(tree)}"] = hits
        sandbox.remove_tree(tree)
    assert not found, found


def test_unknown_pth_files_are_not_loaded():
    assert all(p.endswith(".pth") for p in sandbox.installed_pth_files())
    assert not any("zz_" in p or "__editable__" in p for p in sandbox.installed_pth_files())


def test_detached_grandchildren_are_killed():
    """Run in a child that becomes a subreaper, like the grader does."""
    code = (
        "import os, subprocess, sys, time\n"
        "from autograder.grader import sandbox\n"
        "assert sandbox.become_subreaper()\n"
        "script = 'import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(60)\\n'\n"
        "subprocess.run([sys.executable, '-c', script + '# h11b-detached'])\n"
        "time.sleep(0.3)\n"
        "assert sandbox.descendants(), 'the orphan was not reparented to us'\n"
        "print(sandbox.kill_descendants())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=sandbox.ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 1
    time.sleep(0.2)
    assert not [p for p in os.listdir("/proc") if p.isdigit() and b"h11b-detached" in _cmdline(p)]


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_official_grading_refuses_without_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(sandbox.Refused, match="runs as root"):
        sandbox.take_grading_user()


@ROOT_ONLY
def test_official_grading_refuses_without_its_user_and_useradd(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox.config, "GRADER_USER", "minitorch-nobody-here")
    monkeypatch.setattr(sandbox.config, "GRADER_LOCKS", str(tmp_path))
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    monkeypatch.setattr(sandbox.os.path, "exists", lambda path: False)
    with pytest.raises(sandbox.Refused, match="no user minitorch-nobody-here-0"):
        sandbox.take_grading_user()


PROBE = r"""
import json, os, socket
out = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
status = dict(l.split(":", 1) for l in open("/proc/self/status"))
out["caps"] = status["CapEff"].strip() + status["CapBnd"].strip()
out["seccomp"] = status["Seccomp"].strip()
out["root"] = sorted(os.listdir("/"))
out["procs"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
out["readable"] = [p for p in json.loads(PATHS) if os.path.exists(p)]
try:
    os.fork(); out["fork"] = "allowed"
except OSError as e:
    out["fork"] = e.errno
try:
    socket.create_connection(("127.0.0.1", 22), timeout=2); out["net"] = "reached"
except OSError as e:
    out["net"] = e.errno
try:
    os.kill(int(PARENT), 9); out["kill"] = "sent"
except OSError as e:
    out["kill"] = e.errno
import ctypes
libc = ctypes.CDLL(None, use_errno=True)  # keyctl(KEYCTL_GET_KEYRING_ID, the user keyring)
got = libc.syscall(KEYCTL, 0, -4, 0)
out["keyring"] = got if got >= 0 else ctypes.get_errno()
for where in ("/grading/x", "/tmp/x"):
    try:
        open(where, "w").write("x"); out[where] = "written"
    except OSError as e:
        out[where] = e.errno
print(json.dumps(out))
"""


@ROOT_ONLY
def test_an_official_child_lives_in_a_world_of_its_own(tmp_path):
    """As the grading user, no capability, no process creation, no network, its own /tmp,
    a read-only tree, and nothing of the grader's: not the references, the oracle, the
    results, the grader's process."""
    lease = sandbox.take_grading_user()
    ids = lease.ids
    work = Path(tempfile.mkdtemp(prefix="autograder-test-"))
    try:
        os.chmod(work, 0o700)
        tree = work / "tree"
        tree.mkdir(mode=0o755)
        results = work / "results.json"
        results.write_text("{}")
        secrets = [str(sandbox.ROOT / "solutions" / "reference" / "ch1.py"),
                   str(sandbox.ROOT / "autograder" / "oracle.json.gz"), str(results), str(work),
                   str(sandbox.ROOT / "autograder" / "grader"), "/root/.ssh", "/etc/shadow",
                   "/home"]  # fmt: skip
        code = PROBE.replace("PATHS", repr(json.dumps(secrets))).replace("PARENT", str(os.getpid()))
        code = code.replace("KEYCTL", str(sandbox._SECCOMP[platform.machine()][5][2]))
        world = sandbox.new_world(work, tree)
        proc = sandbox.official_popen([sandbox.python(), "-I", "-S", "-c", code], world, ids,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      cwd="/", env={"PATH": "/usr/bin:/bin"})  # fmt: skip
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        seen = json.loads(stdout)
    finally:
        sandbox.remove_tree(work)
        lease.release()
    assert (seen["uid"], seen["gid"], seen["groups"]) == (ids[0], ids[1], [])
    assert seen["caps"] == "0" * 32 and seen["seccomp"] == "2"
    assert {"grading", "tmp", "usr", "proc"} <= set(seen["root"]) and "home" not in seen["root"]
    assert seen["readable"] == [], seen["readable"]
    assert seen["procs"] == [1]  # itself, the init of its own PID namespace
    assert seen["fork"] == 1 and seen["net"] in (101, 113, 111) and seen["kill"] in (1, 3)
    assert seen["/grading/x"] == 30 and seen["/tmp/x"] == "written"
    assert seen["keyring"] == 38  # ENOSYS: no user keyring shared with the run's other children


VICTIM = """
import time
for where in ("/tmp", "/cache"):
    open(f"{where}/mine", "w").write("a fresh program's own file")
print("fresh program ready", flush=True)
time.sleep(120)
"""


@ROOT_ONLY
def test_a_test_process_cannot_reach_a_benchmarks_fresh_programs():
    """The issue's attack: a test process (same user) found a benchmark's fresh program in
    /proc, and could list and write its /tmp, open its memory and signal it. Each child is
    now alone in a PID namespace of its own; the fresh programs' shared /cache is a tmpfs."""
    from autograder.grader.children import Launcher

    work = Path(tempfile.mkdtemp(prefix="autograder-test-"))
    os.chmod(work, 0o700)
    launcher = Launcher(official=True, work=work)
    try:
        tree = sandbox.build_tree(sandbox.ROOT / "minitorch", False,
                                  dest=Path(tempfile.mkdtemp(dir=work)))  # fmt: skip
        peek = (Path(__file__).parent / "hostile" / "_peek_fresh.py").read_text()
        scratch = launcher.scratch_dir(False)
        victim = launcher.start({"kind": "program", "program": VICTIM}, tree, "learner",
                                scratch=scratch)  # fmt: skip
        deadline = time.monotonic() + 120
        while b"fresh program ready" not in victim.log.read_bytes():
            assert victim.exit_code() is None and time.monotonic() < deadline, victim.tail()
            time.sleep(0.1)
        assert os.path.ismount(scratch) and (scratch / "mine").exists()
        probe = launcher.start({"kind": "program", "program": peek}, tree, "learner")
        probe.popen.wait(timeout=120)
        reached = json.loads(probe.log.read_text().strip().splitlines()[-1])
        alive = victim.exit_code() is None
        launcher.finish(probe, others=(victim,))
        launcher.finish(victim)
    finally:
        launcher.close()
        sandbox.remove_tree(work)
    assert alive
    assert reached == {"seen": [], "tmp": [], "written": [], "memory": [], "signalled": [],
                       "any": 3}, reached  # fmt: skip
    assert not os.path.ismount(scratch)


@ROOT_ONLY
def test_two_runs_never_share_a_grading_user(monkeypatch):
    """Two official runs at once once shared one user, and so killed and read each other's
    processes. Each takes a user of the pool no other run holds; when all are taken, the
    next is refused, saying why."""
    a = sandbox.take_grading_user()
    b = sandbox.take_grading_user()
    try:
        assert a.ids != b.ids and a.name != b.name
        taken = 1 + max(int(lease.name.rsplit("-", 1)[1]) for lease in (a, b))
        monkeypatch.setattr(sandbox.config, "GRADER_USERS", taken)
        with pytest.raises(sandbox.Refused, match=f"{taken} official gradings already run"):
            sandbox.take_grading_user()
        c_name = b.name
        b.release()
        b = sandbox.take_grading_user()
        assert b.name == c_name  # let go: the next run may take it
    finally:
        a.release()
        b.release()
