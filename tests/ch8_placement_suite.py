"""Writes ``autograder/tests/ch8/placement_suite.py``: the fixed buffer sets exercise 8.9 is
graded on, frozen as literal ``(start, end, nbytes)`` lives so that grading runs none of the
learner's code but the function under test (the compiler, liveness and in-place merges that
produce a real plan's buffers are the learner's own exercises in a learner's process).

    .venv/bin/python -m tests.ch8_placement_suite   # about 25 s: it compiles three training steps

Real plans come from the course's code in reference mode (``plan_memory``: lives after in-place
merges, graph outputs left out); the synthetic sets are built here from fixed seeds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "autograder" / "tests" / "ch8" / "placement_suite.py"
U = 64


def _lives(plan, inplace=True) -> list:
    from minitorch.memory.arena import plan_memory

    mp = plan_memory(plan, inplace=inplace)
    return [(b.start, b.end, b.nbytes) for b in sorted(mp.buffers, key=lambda b: (b.start, b.slot))]


def real() -> dict:
    import minitorch as mt
    from autograder.tests.ch8.util import compiled_model
    from minitorch.compile.capstone import training_step
    from minitorch.fast.cnn import DigitsCNN
    from minitorch.fast.cnn import cross_entropy as cnn_loss
    from minitorch.nn import functional as F
    from minitorch.nn.data import load_digits
    from minitorch.nn.optim import SGD, Adam
    from minitorch.nn.train import mlp
    from minitorch.transformer.data import make_batch
    from minitorch.transformer.measure import make_step
    from minitorch.transformer.model import TinyGPT

    mt.set_mode("reference")
    out = {}
    _, _, c = compiled_model("attention")  # the chapter's attention block, no in-place merges
    out["attention forward"] = _lives(c.plan, inplace=False)
    x, y, _, _ = load_digits(seed=0)
    xb, yb = mt.tensor(x[:32]), mt.tensor(y[:32])
    for name, model, loss in [
        ("MLP training step", mlp([64, 128, 10], seed=0), F.cross_entropy),
        ("CNN training step", DigitsCNN((8, 16), 32, seed=0), cnn_loss),
    ]:
        step = mt.compile(training_step(model, SGD(model, lr=0.1, momentum=0.9), loss))
        step(xb, yb)
        out[name] = _lives(step.last.compiled.plan)
    rng = np.random.default_rng(0)
    gpt = TinyGPT(65, seed=0)
    step = mt.compile(make_step(gpt, Adam(gpt, lr=3e-3)))
    step(*make_batch([rng.integers(1, 65, 65) for _ in range(8)], 64))
    out["TinyGPT training step"] = _lives(step.last.compiled.plan)
    return out


def _random(seed, n, steps, units, longest, ragged=False) -> list:
    """``n`` lives in ``[0, steps + longest)``; sizes in units of 64 bytes, less up to 63 bytes
    when ``ragged`` (sizes that alignment rounds up)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = int(rng.integers(0, steps))
        b = a + int(rng.integers(0, longest))
        size = int(rng.choice(units)) * U - (int(rng.integers(0, U)) if ragged else 0)
        out.append((a, b, size))
    return out


def synthetic() -> dict:
    out = {}
    # long-lived large buffers, staggered, with many small short-lived ones between them
    big = [(6 * i, 6 * i + 14, (40 + 7 * i) * U) for i in range(6)]
    small = [(t, t + k % 2, (3 + (7 * t + 5 * k) % 11) * U) for t in range(46) for k in range(3)]
    out["sandwich"] = big + small
    # staircase: buffer i lives from step i to a common late end, shrinking, with temporaries
    stairs = [(i, 16 + i // 2, (24 - i) * U) for i in range(16)]
    out["staircase"] = stairs + [(i, i + 1, (5 + 3 * (i % 4)) * U) for i in range(16)]
    rng = np.random.default_rng(1)
    starts = [int(a) for a in rng.integers(0, 40, 60)]
    out["equal sizes"] = [(a, a + int(rng.integers(0, 12)), 16 * U) for a in starts]
    # similar sizes with interleaved lives: where the order matters most. The seeds are the
    # ones of 40 where greedy by size fell furthest from the bound, and one plain draw.
    out["interleaved A"] = _random(20, 40, 20, [3, 4, 5, 6], 5)
    out["interleaved B"] = _random(14, 40, 20, [3, 4, 5, 6], 5)
    out["interleaved C"] = _random(26, 20, 12, [3, 4, 5], 4)
    out["interleaved D"] = _random(26, 30, 15, [1, 2, 3, 4], 4)
    out["ragged sizes"] = _random(0, 60, 30, [2, 3, 4, 5, 7], 6, ragged=True)
    # the book's two examples: greedy by size meets the bound, then needs 10 units of 7
    textbook = [(0, 2, 17), (3, 5, 15), (5, 5, 24), (5, 8, 35), (1, 3, 34), (4, 4, 60), (1, 4, 49)]
    out["textbook"] = [(a, b, n * U) for a, b, n in textbook]
    out["greedy's counterexample"] = [(2, 3, 3 * U), (0, 0, 4 * U), (3, 5, 4 * U), (0, 2, 3 * U)]
    return out


ALIGNMENTS = (64, 16)  # test_place_never_worse_than_greedy_by_size grades at both


def measures(suite: dict) -> dict:
    """``{alignment: {name: (lower bound, greedy by size's arena)}}`` by the references (8.2,
    8.4). The graded tests read these: computing them there would put those answers in the
    learner's repository."""
    from minitorch.memory import Buffer
    from solutions.reference.ch8 import greedy_by_size, lower_bound

    out = {}
    for a in ALIGNMENTS:
        out[a] = {}
        for name, lives in suite.items():
            bs = [Buffer(k + 1, n, np.dtype("float32"), s, e, [k + 1])
                  for k, (s, e, n) in enumerate(lives)]  # fmt: skip
            out[a][name] = (lower_bound(bs, a), greedy_by_size(bs, a))
    return out


def write(suite: dict | None = None) -> None:
    suite = suite or {**real(), **synthetic()}
    lines = [
        '"""The buffer sets exercise 8.9 is graded on: ``{name: [(start, end, nbytes), ...]}``.',
        "",
        "Generated by ``python -m tests.ch8_placement_suite`` (do not edit): real plans of the",
        "course's models in reference mode, then synthetic sets. Slots are 1, 2, ... in list order.",
        '"""',
        "",
        "# fmt: off",
        "SUITE = {",
    ]
    for name, lives in suite.items():
        lines.append(f"    {name!r}: [")
        row = "       "
        for t in lives:
            item = f" ({t[0]}, {t[1]}, {t[2]}),"
            if len(row) + len(item) > 99:
                lines.append(row)
                row = "       "
            row += item
        lines.append(row)
        lines.append("    ],")
    lines += ["}", "", "# {alignment: {name: (lower bound, greedy by size's arena)}}, by the references",
              "MEASURES = {"]  # fmt: skip
    for a, rows in measures(suite).items():
        lines.append(f"    {a}: {{")
        lines += [f"        {name!r}: {pair!r}," for name, pair in rows.items()]
        lines.append("    },")
    lines += ["}", "# fmt: on", ""]
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}: " + ", ".join(f"{k} ({len(v)})" for k, v in suite.items()))


if __name__ == "__main__":
    write()
