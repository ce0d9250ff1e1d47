"""A GPU machine's grading path, tested where CI runs (no GPU).

On a GPU, memory-traffic tests rerun themselves in a child process on the CUDA
simulator (``autograder/tests/ch4/util.py``); ``MINITORCH_RERUN_ON_SIMULATOR=1``
makes a machine without one take that path. The child's comparisons reach the
grader as if made in place, so the references keep full marks; a child that
dies is reported with what it printed. With a GPU, local grading runs only the
benchmarks that need it there: graded tests stay on the simulator, where the
references' comparisons were recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.grader.children import base_env
from autograder.tests.ch4 import util

ROOT = Path(__file__).resolve().parent.parent


def grade(what: list[str], env: dict, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    cmd = [sys.executable, "-m", "autograder", "--solutions", *what, "--no-notebooks",
           "--json", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    return proc, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.parametrize("chapter", ["4", "11"])
def test_references_keep_full_marks_when_traffic_tests_rerun_in_a_child(chapter, tmp_path):
    env = {**os.environ, "MINITORCH_RERUN_ON_SIMULATOR": "1", "HOME": str(tmp_path)}
    proc, data = grade(["--chapter", chapter], env, tmp_path / "results.json")
    assert "recorded comparisons" not in proc.stdout, proc.stdout  # the oracle judged them
    assert data and data["score"] == data["max_score"] > 0, proc.stdout[-3000:]


def test_local_grading_passes_the_switch_on_and_official_grading_does_not(monkeypatch):
    monkeypatch.setenv(util.RERUN, "1")
    assert base_env(False, "/tmp")[util.RERUN] == "1"
    assert util.RERUN not in base_env(True, "/tmp")


def test_grading_children_run_the_learners_kernels_not_the_tuned_ones(monkeypatch):
    monkeypatch.setenv("MINITORCH_CUDA_TUNED", "1")
    for official in (False, True):
        for gpu in (False, True):
            assert base_env(official, "/tmp", gpu)["MINITORCH_CUDA_TUNED"] == "0"


def test_a_child_that_dies_is_reported_with_what_it_printed(monkeypatch, tmp_path):
    # The child's first import fails, as when its boot called a function that had moved.
    (tmp_path / "pytest.py").write_text("raise RuntimeError('the child says why it stopped')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv(util.RERUN, "1")
    request = SimpleNamespace(node=SimpleNamespace(nodeid="autograder/tests/ch4/test_traffic.py"))
    with pytest.raises(AssertionError) as e:
        util.rerun_on_simulator(request)
    text = str(e.value)
    assert "gave no result" in text and "exited with code 1" in text
    assert "the child says why it stopped" in text


def test_with_a_gpu_only_benchmarks_that_need_it_leave_the_simulator(tmp_path):
    # A fake nvidia-smi makes the grader believe in a GPU this machine lacks: the graded
    # tests still run (and pass) on the simulator; the GPU benchmark runs in a child of its
    # own without the simulator, where numba finds no driver, so it fails instead of being
    # left out as "no GPU".
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", HOME=str(tmp_path))
    proc, data = grade(["--exercise", "4.1"], env, tmp_path / "results.json")
    tests = {t["name"]: t for t in data["tests"]}
    graded = [t for name, t in tests.items() if "bench" not in name]
    assert graded and all(t["status"] == "passed" for t in graded), proc.stdout[-3000:]
    bench = tests["4.1 bench_map_bandwidth"]
    assert bench["extra_data"]["status"] != "excluded", bench
