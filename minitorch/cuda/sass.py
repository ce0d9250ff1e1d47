"""What a GPU would run, read without one: ``python -m minitorch.cuda.lowering --sass``.

:mod:`minitorch.cuda.lowering` stops at Numba's LLVM IR. This goes on to the machine code:
NVVM compiles each registered kernel to PTX for a compute capability (9.0, the H100 and
H200, unless ``--cc`` says otherwise), ``ptxas`` assembles it and reports the registers a
thread uses (which bound how many threads a multiprocessor holds) and any spills to local
memory, and ``cuobjdump`` prints the instructions (SASS). Each innermost loop is summarised
by what its instructions do: float math, memory, warp/barrier, and the rest (integer index
arithmetic and control). A loop whose "rest" outweighs its math and memory is paying for
its indexing, which the simulator cannot show: on the simulator every line of Python costs
the same.

One such cost is Numba's own: an array indexed by a *signed* integer is wrapped around when
the index is negative, a compare and a select on every access (the course's tuned kernels
index with ``numba.uint64``/``uint32`` where positions cannot be negative). Another is an
int64 division, which a GPU runs as a loop of dozens of instructions.

It needs the CUDA toolkit's NVVM, NVRTC, ``ptxas``, ``cuobjdump`` and ``nvdisasm``, not a
GPU: NVIDIA's wheels (``pip install nvidia-cuda-nvcc nvidia-cuda-nvrtc
nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm``) or a toolkit under ``CUDA_HOME``.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import site
import subprocess
import tempfile
from collections import Counter

TOOLS = ("ptxas", "cuobjdump", "nvdisasm")
INSTALL = ("pip install nvidia-cuda-nvcc nvidia-cuda-nvrtc nvidia-cuda-cuobjdump "
           "nvidia-cuda-nvdisasm (or set CUDA_HOME to a CUDA toolkit)")  # fmt: skip
KINDS = ("math", "memory", "sync", "rest")


def tool_dirs() -> list[str]:
    """Folders that may hold the toolkit's programs: ``$CUDA_HOME/bin``, NVIDIA's wheels."""
    dirs = [os.path.join(os.environ[v], "bin") for v in ("CUDA_HOME", "CUDA_PATH")
            if os.environ.get(v)]  # fmt: skip
    for root in site.getsitepackages() + [site.getusersitepackages()]:
        dirs += sorted(glob.glob(os.path.join(root, "nvidia", "cu*", "bin")))
    return dirs


def find_tools() -> dict | None:
    """``{tool: path}`` for ``TOOLS``, or None when one is missing."""
    path = os.pathsep.join(tool_dirs() + [os.environ.get("PATH", "")])
    found = {t: shutil.which(t, path=path) for t in TOOLS}
    return found if all(found.values()) else None


def parse_ptxas(text: str) -> dict:
    """Registers, spilled bytes and shared bytes from ``ptxas -v``'s report."""

    def number(pattern):
        m = re.search(pattern, text)
        return int(m.group(1)) if m else 0

    return dict(
        registers=number(r"Used (\d+) registers"),
        spilled=number(r"(\d+) bytes spill stores") + number(r"(\d+) bytes spill loads"),
        shared=number(r"(\d+) bytes smem"),
    )


def parse_sass(text: str) -> list[tuple[int, str]]:
    """``(address, instruction)`` for each instruction that ``cuobjdump -sass`` prints."""
    found = []
    for line in text.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            found.append((int(m.group(1), 16), m.group(2)))
    return found


def opcode(instruction: str) -> str:
    """``@!P0 FFMA.FTZ R1, ...`` -> ``FFMA``."""
    return re.sub(r"^@!?U?P[T\d]+\s+", "", instruction).split()[0].split(".")[0]


def kind(op: str) -> str:
    if op.startswith(("LD", "ST", "ATOM", "RED")) and op not in ("LDC", "ULDC"):
        return "memory"
    if op in ("SHFL", "BAR", "WARPSYNC", "ENDCOLLECTIVE", "MEMBAR", "VOTE"):
        return "sync"
    if op.startswith(("F", "D", "H", "MUFU")) and op not in ("FLO",):
        return "math"
    return "rest"


def inner_loops(instructions: list[tuple[int, str]]) -> list[Counter]:
    """What each innermost loop does: ``Counter`` of :data:`KINDS` over its instructions. A
    loop is a branch back to an earlier address; innermost: no other loop inside it."""
    loops = []
    for at, ins in instructions:
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < at:
            loops.append((int(m.group(1), 16), at))
    inner = [
        (s, e)
        for s, e in loops  # no other loop between s and e
        if not any(s <= s2 and e2 <= e and (s2, e2) != (s, e) for s2, e2 in loops)
    ]
    return [Counter(kind(opcode(i)) for a, i in instructions if s <= a <= e) for s, e in inner]


def compile_sass(body, argtypes, cc, tools: dict) -> tuple[dict, list]:
    """``(ptxas's report, instructions)`` of the kernel ``body`` for compute capability ``cc``."""
    from numba import cuda

    ptx, _ = cuda.compile_ptx(body, argtypes, cc=cc)
    arch = f"sm_{cc[0]}{cc[1]}"
    with tempfile.TemporaryDirectory() as d:
        src, obj = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(tools["nvdisasm"]),
                                                     os.environ.get("PATH", "")]))  # fmt: skip
        run = dict(capture_output=True, text=True, check=True, env=env)
        report = subprocess.run([tools["ptxas"], f"-arch={arch}", "-v", src, "-o", obj], **run)
        listing = subprocess.run([tools["cuobjdump"], "-sass", obj], **run)
    return parse_ptxas(report.stderr), parse_sass(listing.stdout)


def summary(report: dict, instructions: list) -> dict:
    """What :func:`compile_sass` found, as the lowering report's JSON."""
    loops = sorted((dict(c) for c in inner_loops(instructions) if c["math"] or c["memory"]),
                   key=lambda c: -sum(c.values()))  # fmt: skip
    return dict(report, instructions=len(instructions), loops=loops)


def record(found: dict, cc: str, tools: dict) -> dict:
    """What the book shows (``--record PATH``): every kernel's summary, with the compute
    capability, the assembler's version and the date, since nothing here runs at build."""
    import datetime
    from importlib import metadata

    out = subprocess.run([tools["ptxas"], "--version"], capture_output=True, text=True).stdout
    m = re.search(r"V([\d.]+)", out)
    return dict(cc=cc, ptxas=m.group(1) if m else "unknown", numba_cuda=metadata.version("numba-cuda"),
                date=datetime.date.today().isoformat(), kernels=found)  # fmt: skip


def line(found: dict) -> str:
    """One kernel's summary for the terminal."""
    text = (f"{found['registers']:3} registers, {found['spilled']} B spilled, "
            f"{found['shared']:5} B shared, {found['instructions']:4} instructions")  # fmt: skip
    loops = [f"{sum(c.values())} ({', '.join(f'{c.get(k, 0)} {k}' for k in KINDS)})"
             for c in found["loops"][:2]]  # fmt: skip
    return text + ("; loops: " + "; ".join(loops) if loops else "")
