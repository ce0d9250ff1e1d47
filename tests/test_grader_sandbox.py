"""The grader's checks on its own files, on the records it reads and on the processes it leaves."""

import json
import os
import subprocess
import sys
import time

import pytest

from autograder import integrity, sandbox
from autograder.manifest import Item
from autograder.runner import Forged, Result, _score, band_fraction, gate_benchmarks, parse_record

NODE = "autograder/tests/ch1/test_indexing.py::test_strides_from_shape"
BENCH = Item("autograder/tests/ch1/bench_ch1.py::bench_x", "1.3", 2, "benchmark", "speedup",
             [(8, 1.0), (3, 0.5)])  # fmt: skip


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
    ],
)
def test_records_outside_the_schema_are_forged(raw):
    with pytest.raises(Forged):
        parse_record(raw, {NODE})


def test_benchmark_fraction_comes_from_the_graders_bands_and_is_clamped():
    ev = {"outcome": "passed", "duration": 1.0, "figures": {"speedup": 1e9}}
    assert _score(BENCH, ev).score == 2
    assert _score(BENCH, {**ev, "figures": {"speedup": 4.0}}).score == 1
    assert _score(BENCH, {**ev, "figures": {}}).score == 0
    assert band_fraction(5, [(1, 4039.0)]) == 1.0 and band_fraction(5, [(1, -3)]) == 0.0


def test_benchmark_points_need_the_exercises_tests():
    test = Item(NODE, "1.3", 2)
    results = {BENCH.nodeid: Result(BENCH, "passed", 2.0), NODE: Result(test, "failed")}
    gated = gate_benchmarks(results)
    assert gated[BENCH.nodeid].score == 0 and "tests pass" in gated[BENCH.nodeid].message
    results = {BENCH.nodeid: Result(BENCH, "passed", 2.0), NODE: Result(test, "passed", 2.0)}
    assert gate_benchmarks(results)[BENCH.nodeid].score == 2


def test_messages_are_cut():
    assert len(Result(BENCH, "failed", message="x" * 10**6).message) < 2100


def test_withheld_reference_keeps_signature_and_docstring():
    src = 'def f(x):\n    """Doc."""\n    return x\n\n\ndef g(y):\n    return f(y)\n'
    out = sandbox._withhold(src, {"f"}, "1.3")
    ns = {}
    exec(out, ns)
    assert ns["f"].__doc__ == "Doc."
    with pytest.raises(NotImplementedError, match="withheld"):
        ns["g"](1)


def test_unknown_pth_files_are_not_loaded(tmp_path):
    assert all(p.endswith(".pth") for p in sandbox.installed_pth_files())
    assert not any("zz_" in p for p in sandbox.installed_pth_files())


def test_detached_grandchildren_are_killed():
    """Run in a child that becomes a subreaper, like the grader does."""
    code = (
        "import os, subprocess, sys, time\n"
        "from autograder import sandbox\n"
        "assert sandbox.become_subreaper()\n"
        "script = 'import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(60)\\n'\n"
        "subprocess.run([sys.executable, '-c', script + '# h11b-detached'])\n"
        "time.sleep(0.3)\n"
        "assert sandbox.descendants(), 'the orphan was not reparented to us'\n"
        "print(sandbox.kill_descendants())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 1
    time.sleep(0.2)
    left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).count(b"h11b-detached")]
    assert not left


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_messages_unwrap_groups_and_name_unimplemented_exercises():
    from autograder.plugin import _message

    inner = AssertionError("Exercise 1.2: got (0,), expected (1,)")
    inner.__notes__ = ["Falsifying example: test(shape=(2, 2))"]
    group = Exception("Hypothesis found 2 distinct failures.")
    group.exceptions = (inner, ValueError("x"))  # an ExceptionGroup (3.11) or its backport
    text = _message(group, "1.2")
    assert text.startswith("Exercise 1.2: got") and "shape=(2, 2)" in text
    assert (
        _message(NotImplementedError("Exercise 1.3: s"), "1.3")
        == "not implemented yet: Exercise 1.3: s"
    )
    child = AssertionError(
        "child failed\n  stderr = '...NotImplementedError: Exercise 3.4: pack\\n'"
    )
    assert _message(child, "3.4") == "not implemented yet: Exercise 3.4: pack"


def run_limited(script: str, **kw) -> str:
    """``sh -c script`` started the way the grader starts a child."""
    proc = subprocess.run(["sh", "-c", script], cwd=sandbox.ROOT, capture_output=True, text=True,
                          preexec_fn=lambda: sandbox.limit_resources(**kw), timeout=60)  # fmt: skip
    return proc.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces and capabilities need root")
def test_root_child_cannot_see_or_unhide_the_references():
    hidden = sandbox.private_paths(sandbox.ROOT)
    assert (str(sandbox.ROOT / "solutions").encode(), True) in hidden
    out = run_limited(
        "ls solutions | wc -l; grep CapEff /proc/self/status; umount solutions 2>/dev/null;"
        " echo umount=$?; ls solutions | wc -l; test -r minitorch/exercises.py && echo readable",
        hidden=hidden,
    )
    count, caps, umount, after, readable = out.split("\n")[:5]
    assert count == after == "0" and caps.endswith("0000000000000000"), out
    assert umount != "umount=0" and readable == "readable", out
    assert any((sandbox.ROOT / "solutions").iterdir())  # hidden only in the child


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces and capabilities need root")
def test_root_child_cannot_read_the_recorded_expected_values():
    hidden = sandbox.private_paths(sandbox.ROOT)
    oracle = sandbox.ROOT / "autograder" / "oracle.json.gz"
    assert (str(oracle).encode(), False) in hidden
    out = run_limited("wc -c < autograder/oracle.json.gz", hidden=hidden)
    assert out.split()[0] == "0" and oracle.stat().st_size > 0, out


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_root_child_runs_as_the_child_user(monkeypatch):
    monkeypatch.setattr(sandbox, "_CHILD_IDS", (65534, 65534))
    assert run_limited("id -u; id -g").split() == ["65534", "65534"]
    monkeypatch.setattr(sandbox, "_CHILD_IDS", None)
    assert run_limited("id -u").split() == ["0"]  # uid 0 kept, capabilities dropped


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user first")
def test_unprivileged_child_hides_the_references_in_a_user_namespace():
    """A grader that is not root: the mounts live in a user namespace the child cannot undo."""
    hidden = sandbox.private_paths(sandbox.ROOT)

    def as_nobody_then_limit():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
        sandbox.limit_resources(hidden=hidden)

    script = "id -u; ls solutions | wc -l; ls /proc/1/root/ 2>/dev/null | wc -l"
    proc = subprocess.run(["sh", "-c", script], cwd=sandbox.ROOT, capture_output=True, text=True,
                          preexec_fn=as_nobody_then_limit, timeout=60)  # fmt: skip
    if proc.stdout.split()[1:2] != ["0"] and not sandbox._userns_available():
        pytest.skip("unprivileged user namespaces are disabled here")
    assert proc.stdout.split() == ["65534", "0", "0"], proc.stdout + proc.stderr
