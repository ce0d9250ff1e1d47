"""``make check-gpu`` (minitorch/cuda/check.py): the problems it names from faked facts, the
crashes it explains, and its run on this machine (no GPU needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from minitorch.cuda import check, gpu_present
from minitorch.cuda.check import Facts, problems

ROOT = Path(__file__).resolve().parents[1]
# A sound CUDA 12 setup: a 12.9 toolkit on a 12.8 driver is minor version compatibility.
GOOD = Facts(gpu_present=True, gpus=("NVIDIA H200",), driver="570.133.20", driver_cuda=(12, 8),
             numpy="2.4.6", numba="0.68.1", numba_cuda="0.30.4", cuda_bindings="12.9.4",
             toolkit=(12, 9), pinned_numpy="2.4.6", pip="pip")  # fmt: skip


def only(facts: Facts) -> check.Problem:
    found = problems(facts)
    assert len(found) == 1, found
    return found[0]


def test_a_sound_setup_has_no_problem():
    assert problems(GOOD) == []
    assert (
        problems(replace(GOOD, driver_cuda=(13, 0), cuda_bindings="13.5.0", toolkit=(13, 0))) == []
    )


def test_numpy_2_5_with_numba_cuda_0_30_is_named_with_the_pinned_numpy():
    what, fix = only(replace(GOOD, numpy="2.5.2"))
    assert what == ("numpy 2.5.2 with numba-cuda 0.30.4: numba-cuda 0.30 calls np.row_stack when "
                    "it compiles a kernel, and numpy 2.5 removed it")  # fmt: skip
    assert fix.startswith("pip install numpy==2.4.6 (the version requirements.txt pins)")
    assert "numba-cuda release that supports numpy 2.5" in fix
    assert "numpy<2.5" in only(replace(GOOD, numpy="2.5.0", pinned_numpy=None)).fix
    # Named without a GPU too; a numba-cuda newer than 0.30 is left to the crash's explanation.
    nogpu = problems(Facts(gpu_present=False, numpy="2.5.2", numba_cuda="0.30.4"))
    assert "np.row_stack" in nogpu[0].what and "no NVIDIA GPU" in nogpu[1].what
    assert problems(replace(GOOD, numpy="2.5.2", numba_cuda="0.31.0")) == []
    assert problems(replace(GOOD, numpy="2.4.6", numba_cuda="0.30.4")) == []


def test_a_driver_older_than_the_toolkit():
    what, fix = only(replace(GOOD, driver="535.104.05", driver_cuda=(12, 2), toolkit=(13, 0)))
    assert (
        what
        == "driver 535.104.05 supports CUDA 12.2, but the CUDA toolkit numba-cuda loads is 13.0"
    )
    assert fix == ('pip install "numba-cuda[cu12]==0.30.4" (the CUDA 12 toolkit and bindings), '
                   "or update the NVIDIA driver to 580 or newer (CUDA 13)")  # fmt: skip
    # requirements.txt pins the CUDA 13 bindings: on a CUDA 12 driver, named before any import.
    what, fix = only(replace(GOOD, driver_cuda=(12, 2), cuda_bindings="13.5.0", toolkit=None))
    assert what.startswith("cuda-bindings 13.5.0 is the CUDA 13 binding, but the driver")
    assert "numba-cuda[cu12]==0.30.4" in fix
    what, fix = only(replace(GOOD, driver="470.82", driver_cuda=(11, 4)))
    assert "supports CUDA 11.4, but numba-cuda supports only CUDA 12 and 13" in what
    assert fix.startswith("update the NVIDIA driver")


def test_no_toolkit_and_a_silent_driver():
    error = 'DynamicLibNotFoundError: Failure finding "libnvrtc.so.13 or libnvrtc.so.12"'
    what, fix = only(replace(GOOD, driver_cuda=(13, 0), toolkit=None, toolkit_error=error))
    assert what.startswith("numba-cuda found no CUDA toolkit") and "libnvrtc" in what
    assert fix == 'pip install "numba-cuda[cu13]==0.30.4" (the CUDA 13 toolkit and bindings)'
    what, fix = only(replace(GOOD, driver_cuda=None, smi_error="nvidia-smi: No devices were found"))
    assert "driver does not answer (nvidia-smi: No devices were found)" in what
    assert "NUMBA_ENABLE_CUDASIM=1" in fix


def test_no_gpu_and_the_simulator_variable():
    what, fix = only(Facts(gpu_present=False, numpy="2.4.6", numba_cuda="0.30.4"))
    assert what.startswith("no NVIDIA GPU found") and "CUDA simulator" in what
    assert "GPU benchmarks are left out of the total" in what and fix.startswith("nothing")
    what, fix = only(replace(GOOD, simulator_env="1"))
    assert what.startswith("NUMBA_ENABLE_CUDASIM=1 is set") and "unset NUMBA_ENABLE_CUDASIM" in fix
    assert problems(replace(GOOD, simulator_env="0")) == []  # numba reads 0: the GPU


def test_a_crash_of_the_smoke_test_is_named_by_its_cause(capsys):
    facts = replace(GOOD, numpy="2.5.2")

    def crash(message, kind=RuntimeError):
        def smoke():
            raise kind(message)

        return check.attempt("smoke test", smoke, facts)

    got = crash("module 'numpy' has no attribute 'row_stack'", AttributeError)
    assert got == check.numpy_problem(facts) and "pip install numpy==2.4.6" in got.fix
    got = crash("[222] Call to cuLinkAddData results in CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
    assert got.what.startswith("the NVIDIA driver is older than the CUDA toolkit")
    assert "driver version is insufficient" in crash("CUDA driver version is insufficient").what
    assert "CUDA toolkit library" in crash("libNVVM is not available", ImportError).what
    assert "Traceback" not in capsys.readouterr().err  # known causes: no traceback
    got = crash("something else")
    assert got.what == "the smoke test failed: RuntimeError: something else"
    assert "Traceback" in capsys.readouterr().err  # an unknown one shows where it came from
    assert check.attempt("smoke test", lambda: None, facts) is None


def test_benchmarks_left_out_for_want_of_a_gpu_are_found_in_the_results(tmp_path):
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"tests": [
        {"name": "4.1 bench_map_bandwidth", "output": "[excluded] Skipped: no GPU: the simulator"},
        {"name": "4.5 bench_matmul_vs_cublas", "output": "[excluded] Skipped: cupy is not installed"},
        {"name": "4.1 test_map_strided", "output": "[passed]"},
    ]}))  # fmt: skip
    assert check.simulated(out) == ["4.1 bench_map_bandwidth"]
    assert check.simulated(tmp_path / "missing.json") == []


def run(code: list[str], **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "MINITORCH_"))}
    return subprocess.run([sys.executable, *code], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU")
def test_the_check_without_a_gpu_says_so_and_exits_1():
    done = run(["-m", "minitorch.cuda.check"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Problem: no NVIDIA GPU found" in done.stdout
    assert "Verdict: no GPU here" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_the_facts_are_gathered_without_numba_cuda():
    """numba.cuda chooses the GPU or the simulator when it is imported, and a broken setup
    crashes there: the facts and their problems come first."""
    code = ("import sys; from minitorch.cuda import check; check.problems(check.gather()); "
            "print(sorted(m for m in sys.modules if m.startswith('numba.cuda')))")  # fmt: skip
    done = run(["-c", code])
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_smoke_test_passes_on_the_simulator():
    code = ("from minitorch.cuda import check; "
            "assert check.attempt('smoke test', check.smoke, check.gather()) is None")  # fmt: skip
    done = run(["-c", code], NUMBA_ENABLE_CUDASIM="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("matches numpy") == 4 and "right answer" in done.stdout
