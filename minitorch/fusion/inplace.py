"""A fused elementwise loop whose result overwrites one of its inputs (chapter 8 puts a
result in a dying input's place; chapter 9 donates a parameter's buffer to its update;
an epilogue runs over its anchor's result).

LLVM vectorises a loop over several arrays only after a run-time check that the output
overlaps no input; an input that *is* the output fails it, and the loop runs one element
at a time: 7x slower for Adam's update of a 256x64 weight (68 against 9 us). Reading
that input from the output array itself (``out[p]``, then ``out[p] = ...``) leaves
nothing to check. The kernel is generated here for that one case: every input laid out
``flat`` (C order over the output) or ``scalar``, at least one of them the output
(layout ``"out"``); chapter 7's kernels (exercise 7.8) do every other case.
"""

from __future__ import annotations

import numpy as np

from ..tensor.data import TensorData

OUT = "out"  # the layout class of an input whose storage is the output's


def _address(a: np.ndarray, offset: int = 0) -> int | None:
    if not isinstance(a, np.ndarray):
        return None  # a device array: its kernels are chapter 4's
    return a.__array_interface__["data"][0] + offset * a.itemsize


def at(datas: list, dest) -> tuple:
    """The positions of the inputs whose element 0 is ``dest``'s."""
    start = None if dest is None else _address(dest)
    if start is None:
        return ()
    return tuple(
        k
        for k, d in enumerate(datas)
        if isinstance(d, TensorData) and d.storage is not None
        and _address(d.storage, d.offset) == start
    )  # fmt: skip


def mark(layouts: tuple, datas: list, dest) -> tuple:
    """``layouts`` with each ``flat`` input that starts where ``dest`` starts as ``"out"``,
    when every input is ``flat`` or ``scalar`` (else unchanged)."""
    if not all(lay in ("flat", "scalar") for lay in layouts):
        return layouts
    same = [k for k in at(datas, dest) if layouts[k] == "flat"]
    return tuple(OUT if k in same else lay for k, lay in enumerate(layouts))


def source(layouts: tuple, lines: list, result: str, which: str) -> str:
    """``def serial/parallel(out, shape, x0, o0, s0, ...)``, as exercise 7.8's, over ``out.size``."""
    loop = "prange" if which == "parallel" else "range"
    params = "".join(f", x{k}, o{k}, s{k}" for k in range(len(layouts)))
    head, body = [f"def {which}(out, shape{params}):", "    n = out.size"], []
    for k, lay in enumerate(layouts):
        if lay == "scalar":
            head.append(f"    a{k} = x{k}[o{k}]")
        elif lay == "flat":  # a slice: its index p >= 0 needs no check, the loop vectorises
            head.append(f"    x{k} = x{k}[o{k}:o{k} + n]")
            body.append(f"a{k} = x{k}[p]")
        else:
            body.append(f"a{k} = out[p]")
    body += [*lines, f"out[p] = {result}"]
    return "\n".join(head + [f"    for p in {loop}(n):"] + [f"        {b}" for b in body]) + "\n"
