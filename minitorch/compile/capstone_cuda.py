"""The seed's table on the cuda device: ``python -m minitorch.compile.capstone_cuda [--json PATH]``.

Chapter 9's capstone CNN and chapter 11's TinyGPT, each trained eagerly and compiled
on the ``cuda`` device from the same seed: step time (the median of back-to-back
pairs, each step synchronised), peak device memory of one step (every buffer the
backend allocates, chapter 8's ``track_memory``), kernel launches per step, the first
call (trace + compile + run) and whether the first losses agree. With PyTorch
installed and a GPU it sees, a column for PyTorch's eager step on the GPU (the CNN:
TinyGPT has no PyTorch twin here). ``--json`` writes the record the book shows
(``book/data/ch9_gpu.json``): a run on Numba's simulator is marked as such, and the
book never shows one as a GPU run (its launches and bytes are exact, its times are not).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path

import numpy as np

from .capstone import GPU_ROWS

BOOK_RECORD = Path(__file__).resolve().parents[2] / "book" / "data" / "ch9_gpu.json"
HOW_TO_RECORD = (  # printed in the book: lines under 100 characters
    "To record one, run on a machine with an NVIDIA GPU\n"
    "  python -m minitorch.compile.capstone_cuda --json book/data/ch9_gpu.json\n"
    "and rebuild the book."
)


def _models(quick: bool) -> dict:
    return {name: rows(quick) for name, rows in GPU_ROWS.items()}


def _sync() -> None:
    from ..backends import base

    base.current("cuda").synchronize()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    _sync()
    return time.perf_counter() - t0


def _side(make_model, make_step, batch, compiled: bool, mode: str, warm: int) -> dict:
    """One side of a row: the step, its first call, losses, launches and device peak."""
    from .. import compile as compile_
    from ..core.creation import tensor
    from ..core.instrument import LAUNCHES
    from ..memory import track_memory
    from ..nn.optim import SGD

    model = make_model().to("cuda")
    step = make_step(model, SGD(model, lr=0.05, momentum=0.9))
    step = compile_(step, mode=mode) if compiled else step
    inputs = [tensor(v, device="cuda") for v in batch]
    losses = []
    first = _timed(lambda: losses.append(step(*inputs)))
    for _ in range(warm):
        losses.append(step(*inputs))
    before = LAUNCHES[0]
    with track_memory() as m:
        losses.append(step(*inputs))
        _sync()
    peak = m.device.peak
    runner = getattr(getattr(step, "last", None), "compiled", None)
    runner = getattr(runner, "runner", None)
    if getattr(runner, "keep", False) and getattr(runner, "arena", None) is not None:
        peak += runner.arena.nbytes  # a kept arena was allocated before the step measured
    return {
        "step": lambda: step(*inputs),
        "first_call_s": first,
        "losses": [float(v.item()) for v in losses],
        "launches": LAUNCHES[0] - before,
        "peak_bytes": int(peak),
    }


def _torch_side(twin, batch, pairs: int) -> dict | None:
    """PyTorch's eager step on the GPU (``None`` without torch or without a GPU it sees)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.manual_seed(0)
    model = twin().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = (torch.from_numpy(v).cuda() for v in batch)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x.reshape(len(x), -1)), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(3):
        step()
    torch.cuda.reset_peak_memory_stats()
    held = torch.cuda.memory_allocated()
    step()
    peak = torch.cuda.max_memory_allocated() - held
    times = []
    for _ in range(pairs):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"torch_ms": statistics.median(times) * 1e3, "torch_peak_bytes": int(peak)}


def row(name, make_model, make_step, batch, twin, mode="default", pairs=20, warm=2) -> dict:
    """Eager against compiled on cuda for one model: one row of the record."""
    e = _side(make_model, make_step, batch, False, mode, warm)
    c = _side(make_model, make_step, batch, True, mode, warm)
    te, tc = [], []
    for k in range(pairs):  # back-to-back pairs: load on the machine hits both alike
        for compiled in (False, True) if k % 2 == 0 else (True, False):
            (tc if compiled else te).append(_timed(c["step"] if compiled else e["step"]))
    out = {
        "model": name,
        "eager_ms": statistics.median(te) * 1e3,
        "compiled_ms": statistics.median(tc) * 1e3,
        "eager_peak_bytes": e["peak_bytes"],
        "compiled_peak_bytes": c["peak_bytes"],
        "eager_launches": e["launches"],
        "compiled_launches": c["launches"],
        "first_call_s": c["first_call_s"],
        "losses_agree": bool(np.allclose(e["losses"], c["losses"], rtol=1e-4, atol=1e-6)),
        "torch_ms": None,
        "torch_peak_bytes": None,
    }
    if twin is not None:
        out.update(_torch_side(twin, batch, pairs) or {})
    return out


def machine() -> tuple[str, bool]:
    """(the device's name, whether it is Numba's simulator)."""
    from ..cuda import backend as cb

    if cb.SIMULATOR:
        return "Numba CUDA simulator (no GPU)", True
    name = cb.cuda.get_current_device().name
    return (name.decode() if isinstance(name, bytes) else str(name)), False


def gpu_table(quick: bool = False, mode: str = "default", pairs: int | None = None) -> dict:
    """The record: machine, date, mode and one row per model."""
    name, simulated = machine()
    pairs = pairs or (2 if quick else 20)
    rows = [row(n, *spec, mode=mode, pairs=pairs) for n, spec in _models(quick).items()]
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {
        "machine": name,
        "simulator": simulated,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": mode,
        "quick": quick,
        "torch": torch_version,
        "rows": rows,
    }


def table_text(record: dict) -> str:
    """The record as text, one line per model (times in ms, peaks in KiB)."""
    head = (
        f"{'model':13} {'eager ms':>9} {'comp ms':>9} {'ratio':>6} {'peak KiB e/c':>15} "
        f"{'launches e/c':>13} {'1st s':>6} {'torch ms':>9}"
    )
    lines = [f"{record['machine']}, {record['date']}, mode {record['mode']}", head]
    for r in record["rows"]:
        torch_ms = "-" if r["torch_ms"] is None else f"{r['torch_ms']:.2f}"
        peaks = f"{r['eager_peak_bytes'] / 1024:.0f}/{r['compiled_peak_bytes'] / 1024:.0f}"
        lines.append(
            f"{r['model']:13} {r['eager_ms']:9.2f} {r['compiled_ms']:9.2f} "
            f"{r['compiled_ms'] / r['eager_ms']:5.2f}x {peaks:>15} "
            f"{r['eager_launches']:>6}/{r['compiled_launches']:<6} {r['first_call_s']:6.2f} "
            f"{torch_ms:>9}"
        )
    return "\n".join(lines)


def book_text(path=BOOK_RECORD) -> str:
    """What chapter 9 shows when built without a GPU: the last recorded GPU run, or that
    there is none and how to record one. A simulator's record is not a GPU run."""
    path = Path(path)
    record = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    if record is None or record.get("simulator", True):
        return "No GPU run has been recorded yet. " + HOW_TO_RECORD
    return (
        "This build ran without a GPU. The last recorded GPU run "
        f"({record['machine']}, {record['date']}):\n" + table_text(record)
    )


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny models (the simulator's sizes)")
    ap.add_argument("--mode", default="default", help="the compile mode of the compiled column")
    ap.add_argument("--json", metavar="PATH", help="write the record there (the book reads it)")
    args = ap.parse_args(argv)
    record = gpu_table(quick=args.quick, mode=args.mode)
    print(table_text(record))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


if __name__ == "__main__":
    main()
