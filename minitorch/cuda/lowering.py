"""What the kernels compute in on a GPU, found without one: ``python -m minitorch.cuda.lowering``.

The simulator runs a kernel body as Python on numpy scalars, whose rules are not
Numba's: numpy keeps ``0.0 + float32`` in float32, Numba types the literal ``0.0``
as float64 and the sum with it. Whether a float32 kernel stays float32 on the
device is a question for numba-cuda's own compiler, so this module asks it: it
types and lowers each kernel for arguments of one dtype to LLVM IR, optimizes the
IR (a constant such as ``float32(-inf)`` folds away, as it does on the device) and
counts the instructions left that compute with or convert to a float64 (``double``).
That needs numba-cuda and llvmlite, neither a GPU nor the CUDA toolkit, but a
process whose ``numba.cuda`` is not the simulator: :func:`report` starts one, in the
current mode (your kernels in learner mode)::

    python -m minitorch.cuda.lowering minitorch.transformer.cuda

With ``--sass`` (and the CUDA toolkit's assembler installed) it goes on to the machine code
and reports each kernel's registers, spills and loops (:mod:`minitorch.cuda.sass`).

A chapter names its kernels with :func:`register`; the modules named on the command
line are imported first, so that they register theirs.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import numpy as np

# name -> (build(dtype) -> (kernel body, argument types), dtypes it is lowered for)
KERNELS: dict = {}
CC = (7, 5)  # the compute capability lowered for (a T4); typing does not depend on it


def register(name: str, dtypes=("float32", "int64")):
    """Add ``build(numba_type) -> (body, argument types)`` as kernel ``name``, lowered per dtype."""

    def deco(build):
        KERNELS[name] = (build, tuple(dtypes))
        return build

    return deco


def float64_ops(body, argtypes) -> int:
    """Instructions of the optimized IR of ``body`` (and what it calls) that use a float64."""
    import llvmlite.binding as llvm
    from numba.cuda.compiler import compile_cuda

    cres = compile_cuda(body, None, argtypes, cc=CC)
    llvm.initialize_native_target()
    machine = llvm.Target.from_default_triple().create_target_machine()
    count = 0
    for text in cres.library.llvm_strs:  # the kernel's module and its device functions'
        module = llvm.parse_assembly(text)
        builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(2))
        builder.getModulePassManager().run(module, builder)
        lines = str(module).splitlines()
        count += sum("double" in line and not line.startswith("declare") for line in lines)
    return count


def _lower_all(cc=None, only: str = "") -> dict:
    """Each kernel's float64 count, or with ``cc`` its machine code's summary (:mod:`.sass`);
    only the kernels whose name contains ``only``."""
    # Device functions ask the current GPU for its compute capability when they compile.
    import types

    import numba
    from numba.cuda import dispatcher

    from . import sass

    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc or CC)
    tools = sass.find_tools() if cc else None
    if cc and tools is None:
        raise SystemExit(f"--sass needs ptxas, cuobjdump and nvdisasm: {sass.INSTALL}")
    result = {}
    for name, (build, dtypes) in KERNELS.items():
        for dtype in dtypes if only in name else ():
            try:
                body, argtypes = build(numba.from_dtype(np.dtype(dtype)))
                if cc:
                    count = sass.summary(*sass.compile_sass(body, argtypes, cc, tools))
                else:
                    count = float64_ops(body, argtypes)
            except NotImplementedError:
                count = "not done"
            except Exception as e:  # a kernel that does not compile: say why
                count = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
            result.setdefault(name, {})[dtype] = count
    return result


def report(*modules: str, sass: str | None = None, only: str = "") -> dict:
    """``{kernel: {dtype: float64 instructions}}`` (with ``sass="9.0"``, the machine code's
    summary for that compute capability), lowered in a child process without the simulator,
    in this process's mode; ``modules`` are imported there first; ``only``: the kernels whose
    name contains it."""
    from ..exercises import get_mode

    mode, focus = get_mode()
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", MINITORCH_MODE=mode,
               MINITORCH_FOCUS=",".join(sorted(focus)))  # fmt: skip
    flags = ["--json"] + ([f"--sass={sass}"] if sass else []) + ([f"--only={only}"] if only else [])
    proc = subprocess.run([sys.executable, "-m", __name__, *flags, *modules], env=env,
                          capture_output=True, text=True, timeout=1200)  # fmt: skip
    if proc.returncode:
        raise RuntimeError(f"lowering failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def _course_kernels() -> None:
    """Chapter 4's kernels: the reductions and matmul, and every op's map or zip."""
    import numba

    from ..core.registry import OPS, OpKind, get_op
    from ..exercises import implementation
    from . import backend as cb

    i64 = numba.int64
    meta = i64[::1]

    @register("4.3 block_sum_kernel")
    def _(t):
        return implementation("4.3")(cb.THREADS, t), (t[::1], t[::1], i64)

    for name in ("sum", "max"):

        @register(f"4.4 reduce_kernel ({name})")
        def _(t, op=get_op(name)):
            add = cb._named_fn("add", lambda x, y: x + y)
            fold = add if op.name == "sum" else cb.device_fn(op)
            start = cb._start(op, np.dtype(str(t)))
            body = implementation("4.4")(fold, start, cb.REDUCE_THREADS, t)
            return body, (t[::1], meta, i64, t[::1], meta, meta, i64, i64)

    @register("4.5 matmul_kernel")
    def _(t):
        body = implementation("4.5")(cb.TILE, cb.matmul_type(str(t)))
        return body, (t[::1], t[::1], meta, i64, t[::1], meta, i64, i64, i64, i64)

    def view(t):
        return (t[::1], meta, meta, i64)

    for name, op in sorted(OPS.items()):
        unary = op.kind is OpKind.ELEMENTWISE
        if op.scalar is None or op.num_inputs != (1 if unary else 2):  # as the backend maps
            continue

        @register(f"4.{1 if unary else 2} {'map' if unary else 'zip'}: {name}", ("float32",))
        def _(t, op=op, unary=unary):
            body = implementation("4.1" if unary else "4.2")(cb.device_fn(op))
            return body, (t[::1], meta, i64) + view(t) * (1 if unary else 2)  # out in t too

    @register("4.2 zip: where (each side picked)", ("float32",))
    def _(t):
        body = implementation("4.2")(cb._named_fn("pick_a", cb._pick_a))
        return body, (t[::1], meta, i64) + view(numba.boolean) + view(t)


def main(argv: list[str]) -> None:
    """``[--json] [--sass[=9.0] [--record=PATH]] [--only=NAME] [module ...]``: the float64
    report, or the machine code's, of every kernel (or those whose name contains NAME)."""
    from numba.core import config

    from . import sass

    modules = [a for a in argv if not a.startswith("--")]
    cc = next((a.partition("=")[2] or "9.0" for a in argv if a.startswith("--sass")), None)
    only = next((a.partition("=")[2] for a in argv if a.startswith("--only=")), "")
    if config.ENABLE_CUDASIM:  # chosen when this package loaded: lower in a child without it
        found = report(*modules, sass=cc, only=only)
    else:
        import minitorch  # noqa: F401  (registers the exercises)

        _course_kernels()
        for module in modules:
            importlib.import_module(module)
        found = _lower_all(tuple(int(p) for p in cc.split(".")) if cc else None, only)
    path = next((a.partition("=")[2] for a in argv if a.startswith("--record=")), None)
    if cc and path:  # the book's record (book/data/ch4_sass.json)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(sass.record(found, cc, sass.find_tools()), f, indent=1)
            f.write("\n")
    if "--json" in argv:
        print(json.dumps(found))
        return
    if cc:
        print(f"Each kernel's machine code for compute capability {cc} (ptxas, cuobjdump):")
    else:
        print("float64 instructions left in each kernel, lowered by numba-cuda for a GPU:")
    for name, counts in found.items():
        for d, c in counts.items():
            if cc:
                print(f"  {name:44} {d:8} " + (sass.line(c) if isinstance(c, dict) else c))
        if not cc:
            print(f"  {name:36} " + "  ".join(f"{d}: {c}" for d, c in counts.items()))


if __name__ == "__main__":  # run as the imported module, whose KERNELS chapters fill
    importlib.import_module("minitorch.cuda.lowering").main(sys.argv[1:])
