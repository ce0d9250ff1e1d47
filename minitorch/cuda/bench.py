"""Issue 42's table on the cuda device: ``python -m minitorch.cuda.bench [--quick] [--json PATH]``.

Every row runs through the public API (tensors on ``device="cuda"``, ``minitorch.compile``),
so whichever kernels the backend picks are the ones timed. A row's time is the minimum of
``--repeat`` calls (10 by default), each followed by a device synchronisation, after one
warm-up call (which compiles); that warm-up result is checked against numpy (or, for the
training steps, against the same step on the CPU), so a row that computes the wrong thing
fails instead of printing a fast time. PyTorch's column is filled when torch with CUDA is
importable (TF32 off, as the issue measured). ``--quick`` runs every row at tiny sizes, which
is what CI does on Numba's simulator (times there mean nothing).

The rows reach chapters 9 and 11 through the top-level package, as a user's script would:
this is a measurement of the whole course on one device, kept beside the device's kernels.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from numba import cuda  # this package chose the simulator before it loads

import minitorch as mt  # the public API, as the bench's rows use it

from ..core import instrument
from . import backend as cb

FULL = dict(n=2**26, square=8192, mm=2048, rows=16384, cols=(256, 1024), mlp=(1024, 784, 1024, 10),
            cnn=dict(batch=256, channels=(8, 16), hidden=64),
            gpt=dict(batch=32, context=64, width=128, heads=4, layers=2))  # fmt: skip
QUICK = dict(n=1000, square=24, mm=12, rows=6, cols=(8, 40), mlp=(8, 12, 16, 10),
             cnn=dict(batch=4, channels=(2, 3), hidden=0),
             gpt=dict(batch=2, context=4, width=8, heads=2, layers=1))  # fmt: skip


@dataclass
class Case:
    name: str
    run: Callable[[], object]  # the minitorch call
    check: Callable[[object], None]  # raises unless the first call's result is right
    torch: Callable[[], object] | None = None
    bytes: int = 0  # memory traffic of one call, for GB/s
    flops: int = 0  # arithmetic of one call, for TFLOP/s
    launches: bool = False  # count the call's kernel launches


@dataclass
class Row:
    case: str
    minitorch_us: float
    torch_us: float | None = None
    ratio: float | None = None
    rate: str = ""
    launches: int | None = None


def _torch():
    """torch when it can run on this GPU (never on the simulator), TF32 off; else None."""
    if cb.SIMULATOR:
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def _close(got, want, scale=None, rtol=1e-4):
    """``got`` equals the float64 ``want`` within float32 rounding (of ``scale``'s size)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    atol = 0.0 if scale is None else 1e-6 * np.asarray(scale) + 1e-30
    np.testing.assert_allclose(got, want, rtol=rtol, atol=np.max(atol))


def best_us(fn, sync, repeat: int) -> float:
    """Microseconds of the fastest of ``repeat`` synchronised calls of ``fn`` (warmed up)."""
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


class _LaunchCount:
    """Stands in for chapter 10's profiler in ``core.instrument``: counts CUDA launches only."""

    def __init__(self):
        self.n = 0

    clock = staticmethod(time.perf_counter_ns)

    def add_event(self, name, cat, t0, t1, shapes, backend, **args):
        self.n += "block" in args  # what instrument.launch reports


def count_launches(fn) -> int:
    counter = _LaunchCount()
    old, instrument._active[0] = instrument._active[0], counter
    try:
        fn()
    finally:
        instrument._active[0] = old
    return counter.n


def _on(a):
    return mt.tensor(a, device="cuda")


def _elementwise(s, rng, torch):
    n = s["n"]
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    tx, ty = _on(x), _on(y)
    chain = mt.compile(lambda a, b: (a * 2 + 1).relu() * b, mode="max-autotune")
    want = np.maximum(x.astype(np.float64) * 2 + 1, 0) * y
    gx, gy = (torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()) if torch else (None, None)
    tchain = (lambda: torch.relu(gx * 2 + 1) * gy) if torch else None
    label = f"2^{int(math.log2(n))}" if n & (n - 1) == 0 else str(n)
    return [
        Case(f"add, {label} float32", lambda: tx + ty,
             lambda r: _close(r.numpy(), x.astype(np.float64) + y),
             torch and (lambda: gx + gy), bytes=12 * n),
        Case("relu(x*2+1)*y, eager", lambda: (tx * 2 + 1).relu() * ty,
             lambda r: _close(r.numpy(), want), tchain, bytes=12 * n),
        Case("relu(x*2+1)*y, compiled max-autotune", lambda: chain(tx, ty),
             lambda r: _close(r.numpy(), want), tchain, bytes=12 * n, launches=True),
    ]  # fmt: skip


def _reductions(s, rng, torch):
    n, k = s["n"], s["square"]
    flat = rng.standard_normal(n).astype(np.float32)
    sq = rng.standard_normal((k, k)).astype(np.float32)
    tf, ts = _on(flat), _on(sq)
    gf, gs = (torch.from_numpy(flat).cuda(), torch.from_numpy(sq).cuda()) if torch else (0, 0)
    cases = [Case(f"sum of all {n}", lambda: tf.sum(),
                  lambda r: _close(r.numpy(), flat.sum(dtype=np.float64), np.abs(flat).sum()),
                  torch and (lambda: gf.sum()), bytes=4 * n)]  # fmt: skip
    for axis in (1, 0):
        cases.append(Case(
            f"sum axis {axis} of {k}x{k}", lambda axis=axis: ts.sum(axis=axis),
            lambda r, axis=axis: _close(r.numpy(), sq.sum(axis=axis, dtype=np.float64),
                                        np.abs(sq).sum(axis=axis)),
            torch and (lambda axis=axis: gs.sum(dim=axis)), bytes=4 * k * k,
        ))  # fmt: skip
    return cases


def _matmul(s, rng, torch):
    m = s["mm"]
    a, b = (rng.standard_normal((m, m)).astype(np.float32) for _ in range(2))
    ta, tb = _on(a), _on(b)
    ga, gb = (torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()) if torch else (0, 0)
    want = a.astype(np.float64) @ b
    return [Case(f"matmul {m}x{m} float32", lambda: ta @ tb,
                 lambda r: _close(r.numpy(), want, np.abs(a) @ np.abs(b), rtol=1e-3),
                 torch and (lambda: ga @ gb), flops=2 * m**3)]  # fmt: skip


def _rows(s, rng, torch):
    from ..nn import functional as F

    cases, r = [], s["rows"]
    tf = torch.nn.functional if torch else None
    for c in s["cols"]:
        x = rng.standard_normal((r, c)).astype(np.float32)
        w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
        tx, tw, tb = _on(x), _on(w), _on(b)
        x64 = x.astype(np.float64)
        e = np.exp(x64 - x64.max(axis=1, keepdims=True))
        soft = e / e.sum(axis=1, keepdims=True)
        mu, var = x64.mean(axis=1, keepdims=True), x64.var(axis=1, keepdims=True)
        norm = (x64 - mu) / np.sqrt(var + 1e-5) * w + b
        g = [torch.from_numpy(v).cuda() for v in (x, w, b)] if torch else None
        cases += [
            Case(f"softmax {r}x{c}", lambda tx=tx: F.softmax(tx, axis=-1),
                 lambda res, soft=soft: _close(res.numpy(), soft, 1.0),
                 torch and (lambda g=g: torch.softmax(g[0], dim=-1)), bytes=8 * r * c),
            Case(f"layer norm {r}x{c}",
                 lambda t=(tx, tw, tb): mt.dispatch("layer_norm", *t, eps=1e-5),
                 lambda res, norm=norm: _close(res.numpy(), norm, 1.0, rtol=1e-3),
                 torch and (lambda g=g, c=c: tf.layer_norm(g[0], (c,), g[1], g[2], 1e-5)),
                 bytes=8 * r * c),
        ]  # fmt: skip
    return cases


def _mlp(s, rng, torch):
    from ..nn import functional as F

    batch, d_in, hidden, d_out = s["mlp"]
    x = rng.standard_normal((batch, d_in)).astype(np.float32)
    y = rng.integers(0, d_out, batch)
    init = [(rng.standard_normal(shape) * 0.05).astype(np.float32)
            for shape in ((d_in, hidden), (hidden,), (hidden, d_out), (d_out,))]  # fmt: skip
    params = [mt.tensor(p, device="cuda", requires_grad=True) for p in init]
    tx, ty = _on(x), _on(y)

    def step():
        for p in params:
            p.grad = None
        w1, b1, w2, b2 = params
        loss = F.cross_entropy((tx @ w1 + b1).relu() @ w2 + b2, ty)
        loss.backward()
        return loss, [p.grad for p in params]

    # numpy's forward and backward in float64
    w1, b1, w2, b2 = (p.astype(np.float64) for p in init)
    h = np.maximum(x @ w1 + b1, 0)
    z = h @ w2 + b2
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dz = p.copy()
    dz[np.arange(batch), y] -= 1
    dz /= batch
    dh = (dz @ w2.T) * (h > 0)
    want = [-np.log(p[np.arange(batch), y]).mean(), [x.T @ dh, dh.sum(0), h.T @ dz, dz.sum(0)]]

    def check(result):
        loss, grads = result
        _close(loss.item(), want[0], 1.0, rtol=1e-3)
        for g, w in zip(grads, want[1]):
            _close(g.numpy(), w, np.abs(w).max() + 1e-3, rtol=1e-3)

    tstep = None
    if torch:
        gp = [torch.from_numpy(p).cuda().requires_grad_() for p in init]
        gx, gy = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()

        def tstep():
            for q in gp:
                q.grad = None
            z = torch.relu(gx @ gp[0] + gp[1]) @ gp[2] + gp[3]
            torch.nn.functional.cross_entropy(z, gy).backward()

    flops = 6 * batch * (d_in * hidden + hidden * d_out)  # forward 2, backward 4 per weight
    name = f"MLP {d_in}-{hidden}-{d_out}, batch {batch}, forward+backward"
    return [Case(name, step, check, tstep, flops=flops, launches=True)]


def _copies(s, rng, torch):
    n = s["n"]
    host = rng.standard_normal(n).astype(np.float32)
    dev = _on(host)
    gdev = torch.from_numpy(host).cuda() if torch else None
    return [
        Case("host to device copy", lambda: _on(host),
             lambda r: np.testing.assert_array_equal(r.numpy(), host),
             torch and (lambda: torch.from_numpy(host).to("cuda")), bytes=4 * n),
        Case("device to host copy", lambda: dev.numpy(),
             lambda r: np.testing.assert_array_equal(r, host),
             torch and (lambda: gdev.cpu().numpy()), bytes=4 * n),
    ]  # fmt: skip


def _steps(s, rng, torch):
    """The capstone CNN and TinyGPT training steps, eager and compiled: the first call's loss
    equals the same step's on the CPU."""
    from ..fast import cnn
    from ..nn import functional as F
    from ..nn.optim import Adam

    gpt = mt.transformer  # chapter 11, through the package

    c, g = s["cnn"], s["gpt"]
    images = rng.standard_normal((c["batch"], 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, c["batch"])
    seqs = [rng.integers(0, 65, g["context"] + 1 - (i % 2)) for i in range(g["batch"])]
    gpt_batch = [b.numpy() for b in gpt.make_batch(seqs, g["context"])]

    def trainer(loss_fn):
        def make_step(model, opt):
            def step(*batch):
                opt.zero_grad()
                loss = loss_fn(model, *batch)
                loss.backward()
                opt.step()
                return loss

            return step

        return make_step

    cnn_step = trainer(lambda model, x, y: F.cross_entropy(model(x), y))
    gpt_step = trainer(lambda model, ids, pos, t, mask: gpt.lm_loss(model(ids, pos), t, mask))
    models = {
        "CNN": (lambda: cnn.DigitsCNN(channels=c["channels"], hidden=c["hidden"], seed=0),
                cnn_step, [images, labels], f"batch {c['batch']}"),
        "TinyGPT": (lambda: gpt.TinyGPT(65, context=g["context"], width=g["width"], heads=g["heads"],
                                    layers=g["layers"], seed=0),
                    gpt_step, gpt_batch, f"width {g['width']}, batch {g['batch']}x{g['context']}"),
    }  # fmt: skip
    cases = []
    for name, (make_model, make, batch, size) in models.items():
        cpu = make_model()
        want = make(cpu, Adam(cpu, lr=0.01))(*[mt.tensor(b) for b in batch]).item()
        for mode in (None, "max-autotune"):
            model = make_model().to("cuda")
            step = make(model, Adam(model, lr=0.01))
            step = mt.compile(step, mode=mode) if mode else step
            inputs = [_on(b) for b in batch]
            how = f"compiled {mode}" if mode else "eager"
            cases.append(Case(
                f"{name} training step ({size}), {how}", lambda step=step, i=inputs: step(*i),
                lambda r, want=want: _close(r.item(), want, 1.0, rtol=1e-4), launches=True,
            ))  # fmt: skip
    return cases


GROUPS = [_elementwise, _reductions, _matmul, _rows, _mlp, _copies, _steps]


def _rate(case: Case, us: float) -> str:
    if case.flops:
        return f"{case.flops / us / 1e6:.2f} TFLOP/s"
    if case.bytes:
        return f"{case.bytes / us / 1e3:.1f} GB/s"
    return ""


def machine() -> dict:
    if cb.SIMULATOR:
        name = "Numba CUDA simulator (no GPU)"
    else:
        name = cuda.get_current_device().name
        name = name.decode() if isinstance(name, bytes) else str(name)
    torch = _torch()
    return {"gpu": name, "simulator": cb.SIMULATOR, "tuned": cb.TUNED,
            "python": platform.python_version(), "numba": __import__("numba").__version__,
            "torch": torch.__version__ if torch else None}  # fmt: skip


def run(quick: bool = False, repeat: int | None = None, only: str = "") -> list[Row]:
    """Every row of the table (``only``: those whose name contains it), checked, then timed."""
    sizes, torch = (QUICK if quick else FULL), _torch()
    repeat = repeat or (2 if quick else 10)
    rng = np.random.default_rng(0)
    sync = cuda.synchronize
    tsync = torch.cuda.synchronize if torch else None
    rows = []
    for group in GROUPS:
        for case in group(sizes, rng, torch):
            if only and only not in case.name:
                continue
            result = case.run()  # warm-up: compiles, and is checked
            sync()
            try:
                case.check(result)
            except AssertionError as e:
                raise AssertionError(f"bench row {case.name!r}: wrong result\n{e}") from None
            us = best_us(case.run, sync, repeat)
            row = Row(case.name, us, rate=_rate(case, us))
            if case.launches:
                row.launches = count_launches(case.run)
            if case.torch is not None:
                case.torch()
                tsync()
                row.torch_us = best_us(case.torch, tsync, repeat)
                row.ratio = us / row.torch_us
            rows.append(row)
    return rows


def table(rows: list[Row], info: dict, date: str) -> str:
    lines = [f"minitorch cuda bench on {info['gpu']}, {date} (tuned kernels: {info['tuned']};"
             f" torch: {info['torch'] or 'not available'})",
             f"{'case':64} {'minitorch':>11} {'PyTorch':>11} {'ratio':>6}  rate / launches"]  # fmt: skip
    for r in rows:
        t = f"{r.torch_us:9.0f}us" if r.torch_us is not None else f"{'-':>11}"
        ratio = f"{r.ratio:6.2f}" if r.ratio is not None else f"{'-':>6}"
        extra = r.rate + (f"  {r.launches} launches" if r.launches is not None else "")
        lines.append(f"{r.case:64} {r.minitorch_us:9.0f}us {t} {ratio}  {extra}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m minitorch.cuda.bench", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes (CI, the simulator)")
    p.add_argument(
        "--repeat", type=int, default=None, help="timed calls per row (default 10; 2 quick)"
    )
    p.add_argument("--only", default="", help="only the rows whose name contains this")
    p.add_argument("--json", metavar="PATH", help="also write machine, date and rows as JSON")
    args = p.parse_args(argv)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    info = machine()
    rows = run(args.quick, args.repeat, args.only)
    print(table(rows, info, date))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "date": date, "quick": args.quick,
                       "rows": [asdict(r) for r in rows]}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
