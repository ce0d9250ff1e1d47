"""Chapter 9 (remat) reference: recompute or save, exercise 9.11.

A local search over sets of forward ops to recompute, scored by the rematerialized
graph's peak bytes (ties: less recomputation), never above the work budget. A move
flips one op, or one op together with the forward ops it reads: up to the matmuls
(a cheap chain) or all the way to the inputs (a whole layer, matmul included, which
the budget allows for a layer or two). Start from saving everything; take any move
that lowers the score until none does.
"""

from __future__ import annotations

from minitorch.compile.remat import (
    WORK_BUDGET,
    forward_work,
    peak_bytes,
    recompute_work,
    rematerialize,
)

__all__ = ["choose_recompute"]


def _producers(node, through_matmul):
    """``node`` and the forward ops it reads, transitively (to the matmuls, or past them)."""
    out, todo = [node], [node]
    while todo:
        for i in todo.pop().inputs:
            if i.op in ("input", "const") or i in out:
                continue
            if i.op == "matmul" and not through_matmul:
                continue
            out.append(i)
            todo.append(i)
    return out


def choose_recompute(graph, backward_start):
    forward = [n for n in graph.nodes[:backward_start] if n.op not in ("input", "const")]
    pos = {n: i for i, n in enumerate(graph.nodes)}
    budget = WORK_BUDGET * forward_work(graph, backward_start)
    memo = {}

    def score(chosen):
        key = frozenset(chosen)
        if key not in memo:
            g = rematerialize(graph, backward_start, sorted(key, key=pos.__getitem__))
            work = recompute_work(g)
            memo[key] = (peak_bytes(g), work) if work <= budget else None
        return memo[key]

    moves = [{n} for n in forward]
    moves += [set(_producers(n, False)) for n in forward]
    moves += [set(_producers(n, True)) for n in forward]
    chosen, best, changed = set(), score(set()), True
    while changed:
        changed = False
        for move in moves:
            for candidate in (chosen | move, chosen - move):
                if candidate == chosen:
                    continue
                s = score(candidate)
                if s is not None and s < best:
                    chosen, best, changed = candidate, s, True
    return sorted(chosen, key=pos.__getitem__)
