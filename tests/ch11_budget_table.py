"""Writes ``autograder/tests/ch11/budget_table.py``: the held-out losses exercise 11.14 is
graded on, measured once so that grading trains nothing.

    MINITORCH_MODE=reference .venv/bin/python -m tests.ch11_budget_table   # ~25 min of CPU, one thread

For every budget and every candidate ``(width, layers)``, a ``TinyGPT`` (4 heads, context 32,
seed 0) trains with ``train_lm`` (references of 11.11-11.13; batches of 16, peak rate 3e-3,
a 10% warm-up, cosine to a tenth, weight decay 0.1, clipping at 1.0) for the steps the budget
affords by ``step_flops``; its loss on the last 300 pieces of the text is the table's entry.
"""

from __future__ import annotations

import os
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "autograder" / "tests" / "ch11" / "budget_table.py"
CANDIDATES = [(w, n) for w in (16, 32, 64) for n in (1, 2, 4)]
# The largest budget is where wider models win: below it the smallest candidate is best
# or nearly, and a rule that always picks it would score as if it chose.
BUDGETS = [1e10, 4e10, 1.6e11]
CONTEXT, BATCH, HELD_OUT = 32, 16, 300


def measure(budget, width, layers, vocab, train, held_out) -> tuple[int, float]:
    from minitorch.transformer import measure as M
    from minitorch.transformer.model import TinyGPT
    from minitorch.transformer.train import step_flops, train_lm

    steps = int(budget // step_flops(width, layers, vocab, CONTEXT, BATCH))
    model = TinyGPT(vocab, context=CONTEXT, width=width, heads=4, layers=layers, seed=0)
    if steps:
        train_lm(model, train, steps, batch_size=BATCH, multiple=16, peak_lr=3e-3, seed=0)
    return steps, M.held_out_loss(model, held_out)


def main() -> None:
    os.environ.setdefault("MINITORCH_MODE", "reference")
    from minitorch.transformer import measure as M

    _, tok, seqs = M.corpus(context=CONTEXT)
    train, held_out = seqs[:-HELD_OUT], seqs[-HELD_OUT:]
    rows = []
    with M.one_thread():
        for budget in BUDGETS:
            for width, layers in CANDIDATES:
                steps, loss = measure(budget, width, layers, tok.vocab, train, held_out)
                rows.append((budget, width, layers, steps, round(loss, 4)))
                print(rows[-1], flush=True)
    write(rows, tok.vocab)


def write(rows, vocab) -> None:
    body = "".join(f"    {r!r},\n" for r in rows)
    OUT.write_text(
        '"""Held-out losses exercise 11.14 is graded on. Written by ``python -m '
        "tests.ch11_budget_table`` (do not edit).\n\nRows ``(budget FLOPs, width, layers, steps, "
        'held-out loss in nats per character)``."""\n\n'
        f"VOCAB, CONTEXT, BATCH = {vocab}, {CONTEXT}, {BATCH}\n"
        f"CANDIDATES = {CANDIDATES!r}\nBUDGETS = {BUDGETS!r}\n\nROWS = [\n{body}]\n"
    )


if __name__ == "__main__":
    main()
