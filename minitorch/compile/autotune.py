"""Chapter 9, exercise 9.6: ``max-autotune``, measure kernel variants once and remember.

Which matmul is fastest (numpy's BLAS or chapter 4's Numba kernel) depends on
the shapes and the machine, so the compiler does not guess: it runs each
variant once on inputs of the step's shapes, keeps the fastest, and writes the
choice to a JSON file keyed by the op and its shapes. The next process (or the
next model with the same shapes) reads the file and measures nothing.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from typing import Callable

import numpy as np

from ..core import cachedir
from ..core.errors import OpError
from ..exercises import exercise
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


def load_cache(path: str | None = None) -> dict:
    path = path or cache_path()
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_cache(cache: dict, path: str | None = None) -> None:
    path = path or cache_path()
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(cache, f, indent=1, sort_keys=True)
        os.replace(tmp, path)  # atomic: two processes never see half a file
    except OSError as e:  # a read-only home (a sandbox): the choice is only not remembered
        warnings.warn(
            f"max-autotune: cannot write {path} ({e}); set MINITORCH_CACHE_DIR", stacklevel=2
        )


def time_once(fn: Callable) -> float:
    """Seconds for one call, after one untimed call (which compiles a Numba kernel)."""
    fn()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _variants(step) -> dict[str, Callable]:
    """The kernels a plan step could run with, by name (only matmul has several today)."""
    from ..backends import base as backends
    from ..core.registry import get_op

    if step.node is None or step.node.op != "matmul":
        return {}
    op = get_op("matmul")
    out = {}
    for name, backend in (("blas", "numpy"), ("numba", "numba")):
        try:
            out[name] = backends.get_backend(backend).kernel(op)
        except (KeyError, LookupError, OpError):
            continue
    return out


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
        args = [TensorData.from_numpy(rng.standard_normal(s.shape).astype(s.dtype)) for s in specs]

        def call(kernel, st=st, args=args):
            return lambda: kernel(*args, out=st.spec, **st.attrs)

        name = autotune_choice(cache, key, {n: call(fn) for n, fn in variants.items()}, measure)
        plan.steps[k] = st._replace(kernel=variants[name])
        chosen[key] = name
    if cache != before:
        save_cache(cache, path)
    plan.autotuned = chosen
    return chosen
