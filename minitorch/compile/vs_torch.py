"""minitorch against PyTorch on the CPU, one thread each: ``python -m minitorch.compile.vs_torch``.

It runs your code (``MINITORCH_MODE=reference`` runs the reference solutions).

For each model (the 64-128-10 MLP at batch 32, a 784-256-10 MLP at batch 128 and
the chapter-3 digits CNN at batch 32) it times one SGD training step and one
forward under ``no_grad``: minitorch eager, minitorch compiled (``default``,
``reduce-overhead`` and ``max-autotune``, the fastest one reported), PyTorch
eager, and ``torch.compile`` with ``--torch-compile``. Each figure is the median CPU time (``process_time``)
of interleaved rounds in one process, so a busy machine slows every side alike.
It also reports the compiled step's transient peak (numpy's allocations during
one step, ``tracemalloc``) beside PyTorch's (its profiler's memory timeline) and
the first calls of a compiled step. PyTorch is optional: without it only minitorch's
columns are filled. Never used by tests.

Later chapters add rows to ``capstone.TORCH_ROWS`` (chapter 11: TinyGPT's training step and greedy
decoding, ``transformer/torch_row.py``); a row's sides also give its first loss and
greedy tokens, which must equal PyTorch's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from ..core.tensor import Tensor, no_grad
from . import capstone

MODELS = {"mlp 64-128-10 b32": (64, 128, 10, 32), "mlp 784-256-10 b128": (784, 256, 10, 128)}
CNN = "capstone cnn b32"
BEST_OF = ("default", "reduce-overhead", "max-autotune")  # the compiled modes compared


def _clock(fn, target=0.01) -> tuple:
    """``fn`` and how many calls make about ``target`` seconds of CPU time."""
    n, t = 1, 0.0
    while True:
        t0 = time.process_time()
        for _ in range(n):
            fn()
        t = time.process_time() - t0
        if t >= target or n > 1 << 16:
            return fn, n
        n *= 2


def interleaved(sides: dict, rounds: int = 15) -> dict:
    """Median seconds per call of each side, measured in alternating rounds."""
    calib = {k: _clock(f) for k, f in sides.items()}
    samples: dict = {k: [] for k in sides}
    order = list(sides)
    for r in range(rounds):
        for k in order if r % 2 == 0 else order[::-1]:
            fn, n = calib[k]
            t0 = time.process_time()
            for _ in range(n):
                fn()
            samples[k].append((time.process_time() - t0) / n)
    return {k: statistics.median(v) for k, v in samples.items()}


def _minitorch_model(name: str, seed: int = 0):
    from .. import nn

    if name == CNN:
        from ..fast.cnn import DigitsCNN

        return DigitsCNN((8, 16), 32, seed=seed), (32, 64)
    i, h, o, b = MODELS[name]
    return nn.mlp([i, h, o], seed=seed), (b, i)


def _data(shape, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32), rng.integers(0, classes, shape[0])


def minitorch_sides(name: str) -> tuple[dict, dict, dict]:
    """Step and forward callables for minitorch eager and compiled; and the peaks."""
    import minitorch

    from .. import nn
    from ..fast.cnn import cross_entropy as cnn_loss
    from ..nn import functional as F

    loss_fn = cnn_loss if name == CNN else F.cross_entropy
    steps, forwards, extra = {}, {}, {}
    xs, ys = _data(_minitorch_model(name)[1])
    x, y = Tensor(xs), Tensor(ys)
    for label in ("eager", *BEST_OF):
        model, _ = _minitorch_model(name)
        step = capstone.training_step(model, nn.SGD(model, lr=0.01, momentum=0.9), loss_fn)

        if label == "eager":
            steps[label] = lambda s=step: s(x, y)

            def fwd(model=model):
                with no_grad():
                    return model(x)

            forwards[label] = fwd
            continue
        f = minitorch.compile(step, mode=label)
        t0 = time.perf_counter()
        f(x, y)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        f(x, y)
        extra[f"{label} first call s"] = first
        extra[f"{label} second call s"] = time.perf_counter() - t0
        extra[f"{label} traces after 2 calls"] = f.trace_count
        steps[label] = lambda f=f: f(x, y)
        g = minitorch.compile(model, mode=label)

        def cfwd(g=g):
            with no_grad():
                return g(x)

        cfwd()
        forwards[label] = cfwd
        extra[f"{label} step peak KiB"] = _peak(steps[label], f)
    extra["eager step peak KiB"] = _peak(steps["eager"])
    return steps, forwards, extra


def _peak(fn, step=None) -> float:
    fn()  # warm: the first call compiles
    return capstone._peak(fn, step)


def torch_cnn():
    """PyTorch's twin of the capstone CNN (8 and 16 channels, hidden 32) on flat 8x8 digits."""
    import torch

    return torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 8, 8)),
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10),
    )  # fmt: skip


def torch_sides(name: str, use_compile: bool) -> tuple[dict, dict]:
    import torch

    torch.manual_seed(0)
    if name == CNN:
        model = torch_cnn()
        shape = (32, 64)
    else:
        i, h, o, b = MODELS[name]
        model = torch.nn.Sequential(torch.nn.Linear(i, h), torch.nn.ReLU(), torch.nn.Linear(h, o))
        shape = (b, i)
    xs, ys = _data(shape)
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def fwd():
        with torch.no_grad():
            return model(x)

    steps, forwards = {"torch eager": step}, {"torch eager": fwd}
    step.peak_kib = _torch_peak(step)
    if use_compile:
        cstep, cmodel = torch.compile(step), torch.compile(model)
        cstep(), cmodel(x)
        steps["torch.compile"] = cstep

        def cfwd():
            with torch.no_grad():
                return cmodel(x)

        forwards["torch.compile"] = cfwd
    return steps, forwards


def _torch_peak(fn) -> float | None:
    """PyTorch's transient peak over one call of ``fn`` (KiB): the most bytes its CPU
    allocator held above what it held when the call began, from the profiler's memory
    timeline (a private API: ``None`` when it is not there)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    try:
        from torch.profiler._memory_profiler import MemoryProfileTimeline

        fn()
        kw = {"profile_memory": True, "record_shapes": True, "with_stack": True}
        with profile(activities=[ProfilerActivity.CPU], **kw) as prof:
            fn()
        _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(
            torch.device("cpu")
        )
        held = [sum(s) for s in sizes]
        return (max(held) - held[0]) / 1024
    except Exception:  # noqa: BLE001 - an optional figure
        return None


def measure(names=None, use_compile=False, rounds=15) -> list[dict]:
    """One dict of figures per model (seconds, KiB, ratios)."""
    import numba
    from threadpoolctl import threadpool_limits

    try:
        import torch
    except ImportError:
        torch = None
    rows = []
    numba.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        for name in names or [*MODELS, CNN, *capstone.TORCH_ROWS]:
            ours, theirs = capstone.TORCH_ROWS.get(name, (minitorch_sides, torch_sides))
            steps, forwards, extra = ours(name)
            if torch is not None:
                ts, tf = theirs(name, use_compile)
                extra["torch eager step peak KiB"] = getattr(ts["torch eager"], "peak_kib", None)
                _same_start(name, extra, ts["torch eager"])
                steps.update(ts)
                forwards.update(tf)
            step_t, fwd_t = interleaved(steps, rounds), interleaved(forwards, rounds)
            row = {"model": name, **extra}
            row.update({f"step {k} us": v * 1e6 for k, v in step_t.items()})
            row.update({f"forward {k} us": v * 1e6 for k, v in fwd_t.items()})
            best = min(BEST_OF, key=step_t.get)
            bestf = min(BEST_OF, key=fwd_t.get)
            row["best mode"] = best
            row["compiled/eager step"] = step_t[best] / step_t["eager"]
            row["compiled/eager forward"] = fwd_t[bestf] / fwd_t["eager"]
            if extra.get("torch eager step peak KiB"):
                row["compiled/torch eager step peak"] = (
                    extra[f"{best} step peak KiB"] / extra["torch eager step peak KiB"]
                )
            for k in ("torch eager", "torch.compile"):
                if k in step_t:
                    row[f"compiled/{k} step"] = step_t[best] / step_t[k]
                if k in fwd_t:
                    row[f"compiled/{k} forward"] = fwd_t[bestf] / fwd_t[k]
            rows.append(row)
    return rows


def _same_start(name: str, extra: dict, torch_step) -> None:
    """A row that reports its first loss and greedy tokens must agree with PyTorch's."""
    if "first loss" in extra and abs(extra["first loss"] - torch_step.first_loss) > 1e-4:
        raise AssertionError(f"{name}: first loss {extra['first loss']} against PyTorch's "
                             f"{torch_step.first_loss}: not the same model")  # fmt: skip
    greedy = [v for k, v in extra.items() if k.endswith(" greedy")]
    if greedy and any(g != torch_step.greedy for g in greedy):
        raise AssertionError(f"{name}: greedy tokens differ from PyTorch's")
    for k in [k for k in extra if k.endswith(" greedy")]:
        del extra[k]


def table_text(rows: list[dict]) -> str:
    cols = ["compiled/eager step", "compiled/eager forward", "compiled/torch eager step",
            "compiled/torch eager forward", "compiled/torch eager step peak",
            "compiled/torch.compile step"]  # fmt: skip
    lines = [f"{'model':24}" + "".join(f"{c:>32}" for c in cols)]
    for r in rows:
        cells = "".join(f"{r[c]:32.2f}" if r.get(c) is not None else f"{'-':>32}" for c in cols)
        lines.append(f"{r['model']:24}{cells}")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch-compile", action="store_true", help="also time torch.compile")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument(
        "--model",
        action="append",
        help="one of: " + ", ".join([*MODELS, CNN, *capstone.TORCH_ROWS]),
    )
    args = ap.parse_args(argv)
    rows = measure(args.model, args.torch_compile, args.rounds)
    for r in rows:
        print(r["model"])
        for k, v in r.items():
            if k != "model":
                print(f"  {k:40} {v:.3f}" if isinstance(v, float) else f"  {k:40} {v}")
    print(table_text(rows))


if __name__ == "__main__":
    main()
