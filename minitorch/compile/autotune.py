"""Chapter 9, exercise 9.6: ``max-autotune``, measure kernel variants once and remember.

Which kernel of a big op is fastest (a matmul by numpy's BLAS or by chapter 3's
Numba kernel; a convolution's gradient by numpy calls or one compiled loop) depends
on the shapes and the machine, so the compiler does not guess: it times each
variant on inputs of the step's shapes, keeps the fastest, and writes the choice
to a JSON file keyed by the op, its shapes and attributes. The next process (or
the next model with the same shapes) reads the file and measures nothing.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from typing import Callable

import numpy as np

from ..backends import base as backends
from ..core import cachedir
from ..core.errors import OpError
from ..core.registry import OPS, OpKind
from ..exercises import exercise
from ..passes.plan import checked_kernel
from ..tensor.data import TensorData


@exercise("9.6")
def autotune_choice(
    cache: dict, key: str, candidates: dict[str, Callable], measure: Callable[[Callable], float]
) -> str:
    """The name of the candidate to use for ``key``, measuring only when the cache cannot say.

    * If ``cache[key]`` names one of ``candidates``, return it and measure nothing.
    * Otherwise call ``measure(fn)`` exactly once per candidate (it returns
      seconds), pick the fastest (on a tie the first in ``candidates``' order),
      store its name in ``cache[key]`` and return it. A cached name that is not a
      candidate any more (a variant removed) counts as a miss.
    * No candidates: raise ``OpError("autotune", ...)`` naming ``key``.

    Example:
        >>> autotune_choice({}, "matmul|(32, 64)x(64, 128)", {"blas": f, "numba": g}, timer)
        'blas'
    """
    raise NotImplementedError("Exercise 9.6: autotune_choice")


def cache_path() -> str:
    return str(cachedir.folder("") / "autotune.json")


# Bumped when a candidate kernel changes: choices timed against the old kernels are dropped.
# (3: kernels that prepare themselves for a plan step write into the arena: cheaper.
# 4: softmax's "rows" variant; the Numba layer norm with numpy's bits.
# 5: the rows variant writes every pass into the result: no temporary.
# 6: logsumexp's "rows" variant; the Numba backend's one-pass ``where``.)
KERNELS = 6


def load_cache(path: str | None = None) -> dict:
    path = path or cache_path()
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("kernels") != KERNELS:
        return {}
    return data


def save_cache(cache: dict, path: str | None = None) -> None:
    path = path or cache_path()
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({**cache, "kernels": KERNELS}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)  # atomic: two processes never see half a file
    except OSError as e:  # a read-only home (a sandbox): the choice is only not remembered
        warnings.warn(
            f"max-autotune: cannot write {path} ({e}); set MINITORCH_CACHE_DIR", stacklevel=2
        )


def time_once(fn: Callable, repeat: int = 3) -> float:
    """Seconds for one call: the fastest of ``repeat`` calls, after one untimed call (which
    compiles a Numba kernel). The fastest, since a busy machine only ever adds time."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


# the ops worth measuring: one big call each (elementwise steps are fused, chapter 7)
TUNABLE = (OpKind.ANCHOR, OpKind.OPAQUE)


def _variants(step) -> dict[str, Callable]:
    """The kernels a plan step could run with, by name: the numpy backend's (``blas`` for
    matmul), the numba backend's when that is a different kernel, and the op's registered
    variants (``register_variant``: an im2col convolution, say)."""
    op = OPS.get(step.node.op) if step.node is not None else None  # a fused group is no op
    if op is None or step.spec.device != "cpu":
        return {}  # the candidates are CPU kernels: a cuda plan keeps its own
    # an elementwise op only with a numba kernel of its own (``where``'s one pass): numba's
    # generic loops are not measured (its ``exp`` is not numpy's, bit for bit)
    if op.kind not in TUNABLE and "numba" not in _numba_kernels(op):
        return {}
    out, seen = {}, []
    specs = [i.spec for i in step.node.inputs]
    for backend in ("numpy", "numba"):
        try:
            b = backends.get_backend(backend)
            kernel = b.kernel(op)
        except (KeyError, LookupError, OpError):
            continue
        if kernel not in seen:  # numba's fallback to numpy's kernel is the same candidate
            seen.append(kernel)
            name = "blas" if (backend, op.name) == ("numpy", "matmul") else backend
            out[name] = b.prepare(op, step.spec, specs) or kernel  # as the plan would run it
    for name, fn in op.variants.items():  # a variant that prepares itself, as a plan runs it
        prepare = getattr(fn, "prepare", None)
        out[name] = (prepare(step.spec, specs) if prepare else None) or fn
    return out


def _numba_kernels(op) -> dict:
    """``op.kernels`` once the numba backend has registered its own (it loads on first use)."""
    try:
        backends.get_backend("numba")
    except (KeyError, LookupError, OpError):
        pass
    return op.kernels


BACKEND_OF = {"blas": "numpy"}  # a variant's name, where it is not its backend's


def _runs(fn: Callable) -> bool:
    """Does a candidate run at all? (One built on an exercise not done yet does not.)"""
    try:
        fn()
    except Exception:  # noqa: BLE001 - a stub, or a kernel that cannot take these inputs
        return False
    return True


def _example(spec, rng) -> TensorData:
    """Inputs of a step's shapes to time on: random floats, zero indices."""
    if np.dtype(spec.dtype).kind == "f":
        return TensorData.from_numpy(rng.standard_normal(spec.shape).astype(spec.dtype))
    return TensorData.from_numpy(np.zeros(spec.shape, spec.dtype))


def tune_plan(plan, path: str | None = None, measure=time_once) -> dict[str, str]:
    """Replace each tunable step's kernel by the measured (or cached) fastest; the choices."""
    cache = load_cache(path)
    before = dict(cache)
    chosen = {}
    rng = np.random.default_rng(0)
    for k, st in enumerate(plan.steps):
        variants = _variants(st)
        if len(variants) < 2:
            continue
        specs = [i.spec for i in st.node.inputs]
        key = f"{st.node.op}|{'x'.join(str(s.shape) for s in specs)}|{specs[0].dtype}"
        if st.attrs:  # a conv's stride and padding change which kernel wins
            key += "|" + ",".join(f"{a}={v}" for a, v in sorted(st.attrs.items()))
        args = [_example(s, rng) for s in specs]

        def call(kernel, st=st, args=args):
            return lambda: kernel(*args, out=st.spec, **st.attrs)

        candidates = {n: call(fn) for n, fn in variants.items()}
        # a choice recorded where the exercise it is built on was done (the reference
        # solutions, say) but is a stub here is measured again, as a miss
        if cache.get(key) in candidates and not _runs(candidates[cache[key]]):
            del cache[key]
        if cache.get(key) not in candidates:  # measuring: only candidates that run
            candidates = {n: fn for n, fn in candidates.items() if _runs(fn)}
        if not candidates:
            continue
        name = autotune_choice(cache, key, candidates, measure)
        # the backend the plan was lowered for keeps lowering's kernel (it writes into
        # the arena); another backend's kernel replaces it
        if BACKEND_OF.get(name, name) != backends.current(st.spec.device).name:
            plan.steps[k] = st._replace(kernel=checked_kernel(st.node, variants[name]))
        chosen[key] = name
    if cache != before:
        save_cache(cache, path)
    plan.autotuned = chosen
    return chosen
