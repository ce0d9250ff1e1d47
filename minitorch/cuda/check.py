"""``python -m minitorch.cuda.check`` (``make check-gpu``): is this machine ready to run
chapter 4 on its NVIDIA GPU?

It prints what it finds (GPUs, driver, CUDA versions, packages) and the problems those
facts alone reveal, each with its fix, *before* it tries anything that could crash. Then
it launches kernels on the GPU (one of its own, then minitorch's ``cuda`` ops against
numpy) and runs the graded GPU tests (chapter 4, exercises 11.4 and 11.5) on the
reference solutions. Exit status 0 when all of that passed, 1 when something did not,
no GPU included.

The facts are gathered without importing ``numba.cuda`` (``numba`` itself is already
loaded by chapters 3 and 7): ``numba.cuda`` chooses between the GPU and the simulator
once, when it is imported (see ``minitorch/cuda/__init__.py``), and a broken CUDA setup
fails there or at the first kernel launch.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import traceback
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import gpu_present

ROOT = Path(__file__).resolve().parents[2]  # the repository: the grader and requirements.txt
# The graded GPU tests: (name, the grader's arguments, the chapters whose references they need).
GRADED = (
    ("chapter 4", ["--chapter", "4", "--no-notebooks"], 4),
    ("exercise 11.4", ["--exercise", "11.4"], 11),
    ("exercise 11.5", ["--exercise", "11.5"], 11),
)


@dataclass(frozen=True)
class Facts:
    """What the check knows about the machine; :func:`problems` judges only these."""

    gpu_present: bool  # /dev/nvidia0 or nvidia-smi: minitorch.cuda does not choose the simulator
    gpus: tuple[str, ...] = ()  # the names nvidia-smi lists
    driver: str | None = None  # the driver's version, e.g. "570.133.20"
    driver_cuda: tuple[int, int] | None = None  # the newest CUDA version the driver supports
    smi_error: str | None = None  # why nvidia-smi listed nothing
    numpy: str | None = None
    numba: str | None = None
    numba_cuda: str | None = None
    cuda_bindings: str | None = None
    simulator_env: str | None = None  # NUMBA_ENABLE_CUDASIM
    toolkit: tuple[int, int] | None = None  # the CUDA toolkit numba-cuda loaded (NVRTC's version)
    toolkit_error: str | None = None  # why it loaded none (only looked for with a GPU)
    pinned_numpy: str | None = None  # the numpy requirements.txt pins
    pip: str = "pip"  # the command that installs into this Python


class Problem(NamedTuple):
    what: str
    fix: str


def version(text: str | None) -> tuple[int, ...]:
    """``"2.5.2"`` -> (2, 5, 2); () for an unknown version."""
    return tuple(int(n) for n in re.findall(r"\d+", text or "")[:3])


# Sources of the facts below:
# numba-cuda: https://nvidia.github.io/numba-cuda/user/installation.html (CUDA 12 and 13,
#   `pip install numba-cuda[cu12]` / `[cu13]`) and .../user/minor_version_compatibility.html;
# cuda-bindings: https://nvidia.github.io/cuda-python/cuda-bindings/latest/install.html and
#   support.html (its major.minor is the toolkit's; 12.x needs driver 525.60.13+, 13.x 580.65.06+);
# https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html.
def problems(f: Facts) -> list[Problem]:
    """The problems the facts reveal, each with its fix in plain words (no side effects)."""
    found = []
    # numpy 2.5 removed np.row_stack (deprecated since 2.0); numba-cuda 0.30.x, the newest
    # release when this was written, registers it (numba/cuda/np/arrayobj.py) at its first compile.
    if f.numba_cuda and version(f.numpy)[:2] >= (2, 5) and version(f.numba_cuda)[:2] <= (0, 30):
        found.append(numpy_problem(f))
    if not f.gpu_present:
        return found + [Problem(
            "no NVIDIA GPU found (no /dev/nvidia0, no nvidia-smi): chapter 4 runs on Numba's "
            "CUDA simulator, and the GPU benchmarks are left out of the total",
            "nothing, to follow the course. To use a GPU, install its NVIDIA driver until "
            "`nvidia-smi` lists it, then run `make check-gpu` again")]  # fmt: skip
    if f.simulator_env not in (None, "", "0"):  # numba reads it as an int: 0 is the GPU
        found.append(
            Problem(
                f"NUMBA_ENABLE_CUDASIM={f.simulator_env} is set: kernels run on the simulator, "
                "not on the GPU",
                "unset it (`unset NUMBA_ENABLE_CUDASIM`) to use the GPU",
            )
        )
    if f.driver_cuda is None:
        said = f" ({f.smi_error})" if f.smi_error else ""
        return found + [Problem(
            f"an NVIDIA GPU seems present (/dev/nvidia0 or nvidia-smi), but its driver does not "
            f"answer{said}", "repair the NVIDIA driver until `nvidia-smi` lists the GPU; on a "
            "machine without a GPU, set NUMBA_ENABLE_CUDASIM=1 to use the simulator")]  # fmt: skip
    major, minor = f.driver_cuda
    drv = f"driver {f.driver or '(version unknown)'} supports CUDA {major}.{minor}"
    if major < 12:
        return found + [Problem(f"{drv}, but numba-cuda supports only CUDA 12 and 13",
                                "update the NVIDIA driver: 525 or newer for CUDA 12, "
                                "580 or newer for CUDA 13")]  # fmt: skip
    bindings = version(f.cuda_bindings)[:1]
    if bindings and bindings[0] > major:  # requirements.txt pins the CUDA 13 bindings
        found.append(
            Problem(
                f"cuda-bindings {f.cuda_bindings} is the CUDA {bindings[0]} binding, but the {drv}",
                newer_driver_fix(f),
            )
        )
    # A toolkit of a newer minor version than the driver's works (minor version compatibility,
    # numba-cuda links through nvJitLink); one of a newer major version does not.
    if f.toolkit and f.toolkit[0] > major:
        found.append(
            Problem(
                f"{drv}, but the CUDA toolkit numba-cuda loads is {f.toolkit[0]}.{f.toolkit[1]}",
                newer_driver_fix(f),
            )
        )
    elif f.toolkit_error:
        found.append(Problem(f"numba-cuda found no CUDA toolkit (NVRTC, NVVM, libdevice): "
                             f"{f.toolkit_error}", toolkit_fix(f)))  # fmt: skip
    return found


def numpy_problem(f: Facts) -> Problem:
    minor = ".".join(map(str, version(f.numba_cuda)[:2]))
    pin = (f"numpy=={f.pinned_numpy} (the version requirements.txt pins)" if f.pinned_numpy
           else '"numpy<2.5"')  # fmt: skip
    return Problem(
        f"numpy {f.numpy} with numba-cuda {f.numba_cuda}: numba-cuda {minor} calls "
        "np.row_stack when it compiles a kernel, and numpy 2.5 removed it",
        f"{f.pip} install {pin}, or a numba-cuda release that supports numpy "
        f"{'.'.join(map(str, version(f.numpy)[:2]))}")  # fmt: skip


def toolkit_fix(f: Facts) -> str:
    """Install the toolkit of the driver's CUDA version (numba-cuda's extras [cu12], [cu13])."""
    same = f"=={f.numba_cuda}" if f.numba_cuda else ""  # keeps the numba-cuda version installed
    if f.driver_cuda is None:
        return (f'{f.pip} install "numba-cuda[cu12]{same}" or "numba-cuda[cu13]{same}", '
                "the one of the CUDA version `nvidia-smi` shows")  # fmt: skip
    cu = 12 if f.driver_cuda[0] == 12 else 13
    return f'{f.pip} install "numba-cuda[cu{cu}]{same}" (the CUDA {cu} toolkit and bindings)'


def newer_driver_fix(f: Facts) -> str:
    return f"{toolkit_fix(f)}, or update the NVIDIA driver to 580 or newer (CUDA 13)"


def explain(exc: BaseException, f: Facts) -> Problem | None:
    """The known cause of a crash, or None."""
    text = f"{type(exc).__name__}: {exc}"
    line = " ".join(text.split())[:200]
    if isinstance(exc, AttributeError) and "row_stack" in text:
        return numpy_problem(f)
    if "UNSUPPORTED_PTX_VERSION" in text or "insufficient" in text.lower():
        return Problem(f"the NVIDIA driver is older than the CUDA toolkit numba-cuda compiles "
                       f"with ({line})", newer_driver_fix(f))  # fmt: skip
    if re.search(r"nvvm|libdevice|nvrtc|nvjitlink", text, re.IGNORECASE):
        return Problem(f"numba-cuda could not load a CUDA toolkit library ({line})", toolkit_fix(f))
    return None


def attempt(step: str, fn, f: Facts):
    """``fn()``, or the Problem its crash is: the known cause named, a traceback otherwise."""
    try:
        return fn()
    except Exception as e:
        known = explain(e, f)
        if known is None:
            traceback.print_exc()
            known = Problem(
                f"the {step} failed: {type(e).__name__}: {e}",
                "the traceback above shows where; fix that and check again",
            )
        return known


def gather() -> Facts:
    """The facts, without importing numba.cuda."""
    gpus, driver, smi_error = nvidia_smi()
    exe = os.path.relpath(sys.executable)
    return Facts(
        gpu_present=gpu_present(), gpus=gpus, driver=driver, smi_error=smi_error,
        driver_cuda=driver_cuda(), numpy=installed("numpy"), numba=installed("numba"),
        numba_cuda=installed("numba-cuda"), cuda_bindings=installed("cuda-bindings"),
        simulator_env=os.environ.get("NUMBA_ENABLE_CUDASIM"), pinned_numpy=pinned("numpy"),
        pip=f"{sys.executable if exe.startswith('..') else exe} -m pip",
    )  # fmt: skip


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def pinned(name: str) -> str | None:
    try:
        text = (ROOT / "requirements.txt").read_text()
    except OSError:
        return None
    m = re.search(rf"^{re.escape(name)}==(\S+)", text, re.MULTILINE)
    return m[1] if m else None


def nvidia_smi() -> tuple[tuple[str, ...], str | None, str | None]:
    """(GPU names, driver version, why none) from ``nvidia-smi --query-gpu``."""
    if shutil.which("nvidia-smi") is None:
        return (), None, "nvidia-smi is not on the PATH"
    cmd = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return (), None, f"nvidia-smi: {e}"
    rows = [line.rsplit(",", 1) for line in run.stdout.splitlines() if "," in line]
    if run.returncode or not rows:
        said = (run.stdout + run.stderr).strip().splitlines()
        return (), None, f"nvidia-smi: {said[-1] if said else f'exit status {run.returncode}'}"
    return tuple(n.strip() for n, _ in rows), rows[0][1].strip(), None


def driver_cuda() -> tuple[int, int] | None:
    """The newest CUDA version the driver supports: cuDriverGetVersion (what numba-cuda's
    ``driver.get_version()`` calls), through ctypes so that numba.cuda stays unloaded."""
    try:
        lib = ctypes.CDLL("nvcuda.dll" if os.name == "nt" else "libcuda.so.1")
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) != 0 or v.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    return v.value // 1000, v.value % 1000 // 10  # encoded as 1000 * major + 10 * minor


def with_toolkit(f: Facts) -> Facts:
    """Import numba.cuda (the GPU is chosen now) and read the toolkit version it loaded."""
    from numba import cuda

    try:
        return replace(f, toolkit=tuple(cuda.runtime.get_version()))  # NVRTC's version
    except Exception as e:  # cuda-pathfinder found no libnvrtc, say
        return replace(f, toolkit_error=" ".join(f"{type(e).__name__}: {e}".split())[:200])


def smoke() -> None:
    """Kernels on the GPU: one of this check's own, then minitorch's cuda ops against numpy."""
    from numba import cuda

    from ..core.creation import tensor
    from ..core.registry import dispatch
    from ..exercises import set_mode

    @cuda.jit
    def add_one(x):  # one thread, no cuda.* call: only the toolchain and the launch are tested
        for i in range(x.size):
            x[i] += 1.0

    x = cuda.to_device(np.arange(256, dtype=np.float32))
    add_one[1, 1](x)
    if not np.array_equal(x.copy_to_host(), np.arange(1, 257, dtype=np.float32)):
        raise AssertionError("a kernel of three lines gave a wrong answer")
    print("  a kernel of the check's own: right answer")
    set_mode("reference")  # the chapters' kernels; your own where a reference is not released
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 12), dtype=np.float32), rng.standard_normal((12, 8))
    ta, tb = tensor(a).to("cuda"), tensor(b.astype(np.float32)).to("cuda")
    e = np.exp(a - a.max(-1, keepdims=True))
    cases = {
        "add (4.2)": (lambda: ta + ta, a + a),
        "sum (4.3)": (lambda: ta.sum(), a.sum(dtype=np.float64)),
        "matmul (4.5)": (lambda: ta @ tb, a @ b.astype(np.float32)),
        "softmax (11.4)": (lambda: dispatch("softmax", ta, axis=-1), e / e.sum(-1, keepdims=True)),
    }
    for name, (ours, want) in cases.items():
        try:
            got = ours().numpy()
        except NotImplementedError as exc:  # a learner repository without that reference
            print(f"  {name}: not run: {exc} (its reference is not in this repository)")
            continue
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{name} on the GPU differs from numpy")
        print(f"  {name}: matches numpy")


def graded() -> list[Problem]:
    """The graded GPU tests on the references, as ``make check-solutions`` grades them."""
    found = []
    for name, args, chapters in GRADED:
        refs = ROOT / "solutions" / "reference"
        missing = [c for c in range(1, chapters + 1) if not (refs / f"ch{c}.py").is_file()]
        if missing or not (ROOT / "autograder").is_dir():
            print(f"\n{name}: not run: the references of chapter(s) {missing} are not in this "
                  "repository (`make grade` grades your own code)")  # fmt: skip
            continue
        out = f"build/check-gpu-{name.split()[-1]}.json"  # not build/results.json: `make grade`'s
        cmd = [sys.executable, "-m", "autograder", "--solutions", *args, "--json", out]
        print(f"\n{name}, graded on the reference solutions: python {' '.join(cmd[1:])}",
              flush=True)  # fmt: skip
        status = subprocess.run(cmd, cwd=ROOT).returncode
        if status:
            found.append(Problem(f"the graded tests of {name} did not all pass on the reference "
                                 f"solutions (the grader's exit status: {status})",
                                 "the grader's report above says what failed and why"))  # fmt: skip
        left_out = simulated(ROOT / out)
        if left_out:
            found.append(Problem(
                f"the grader ran {name} on the CUDA simulator, not on the GPU: "
                f"{', '.join(left_out)} said 'no GPU'",
                "check that NUMBA_ENABLE_CUDASIM is not set; if it is not, this copy of the "
                "grader does not grade on the GPU yet (update the course repository)"))  # fmt: skip
    return found


def simulated(results: Path) -> list[str]:
    """The GPU benchmarks the grader left out for want of a GPU (its results.json)."""
    try:
        tests = json.loads(results.read_text())["tests"]
    except (OSError, ValueError, KeyError):
        return []
    out = {t["name"]: t.get("output", "") for t in tests}
    return [
        name for name, said in out.items() if said.startswith("[excluded]") and "no GPU" in said
    ]


def show(f: Facts) -> None:
    supports = f"supports CUDA {f.driver_cuda[0]}.{f.driver_cuda[1]}" if f.driver_cuda else ""
    rows = [
        ("GPU", ", ".join(f.gpus) or ("none listed" if f.gpu_present else
                                      "none found (no /dev/nvidia0, no nvidia-smi)")),
        ("NVIDIA driver", ", ".join(filter(None, [f.driver, supports])) or "-"),
        ("numpy", f"{f.numpy}" + (f" (requirements.txt pins {f.pinned_numpy})"
                                  if f.pinned_numpy and f.pinned_numpy != f.numpy else "")),
        ("numba", f.numba), ("numba-cuda", f.numba_cuda), ("cuda-bindings", f.cuda_bindings),
    ]  # fmt: skip
    if f.gpu_present and f.simulator_env is not None:
        rows.append(("NUMBA_ENABLE_CUDASIM", f.simulator_env))
    for key, value in rows:
        print(f"  {key:<21} {value or 'not installed'}")


def report(found: list[Problem]) -> None:
    def fill(text: str, first: str, rest: str) -> str:  # no break inside "numba-cuda"
        return textwrap.fill(text, 100, initial_indent=first, subsequent_indent=rest,
                             break_on_hyphens=False, break_long_words=False)  # fmt: skip

    for p in found:
        print(fill(p.what, "Problem: ", "  "))
        print(fill(p.fix, "  fix: ", "    "))


def main() -> int:
    print("minitorch GPU check: what this machine has")
    facts = gather()
    show(facts)
    found = problems(facts)
    if not found:  # a GPU and nothing against it: load numba.cuda, then launch kernels
        got = attempt("import of numba.cuda", lambda: with_toolkit(facts), facts)
        found = [got] if isinstance(got, Problem) else problems(got)
        facts, t = (facts, None) if isinstance(got, Problem) else (got, got.toolkit)
        print(f"  {'CUDA toolkit (NVRTC)':<21} {f'{t[0]}.{t[1]}' if t else 'none found'}")
    if not found:
        print("\nKernels on the GPU, compared with numpy:")
        got = attempt("smoke test", smoke, facts)
        found = [got] if isinstance(got, Problem) else graded()
    print()
    report(found)
    if not found:
        gpus = ", ".join(facts.gpus) or "the GPU"
        print(f"Verdict: ready. Kernels run on {gpus} and the graded GPU tests pass.")
    elif not facts.gpu_present:
        print("Verdict: no GPU here: chapter 4 runs on the CUDA simulator (exit status 1).")
    else:
        print(f"Verdict: not ready: {len(found)} problem(s) above, each with its fix; "
              "then run `make check-gpu` again.")  # fmt: skip
    return 0 if not found else 1


if __name__ == "__main__":
    sys.exit(main())
