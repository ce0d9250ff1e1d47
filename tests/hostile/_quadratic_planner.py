"""Not an attack: a correct but quadratic greedy_by_size (every placed buffer scanned for each
new one) and a CPU burner, planted with the 8.4 fixtures."""

import os
import time


def burn_while_timed(seconds: float) -> None:
    if "bench_" not in os.environ.get("PYTEST_CURRENT_TEST", ""):
        return
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def quadratic(buffers, alignment):
    size_of = lambda b: -(-b.nbytes // alignment) * alignment  # noqa: E731
    order = sorted(buffers, key=lambda b: (-size_of(b), b.start, b.slot))
    placed, top = [], 0
    for b in order:
        busy = sorted((p.offset, p.offset + size_of(p)) for p in placed
                      if p.start <= b.end and b.start <= p.end)  # fmt: skip
        offset = 0
        for lo, hi in busy:
            if offset + size_of(b) <= lo:
                break
            offset = max(offset, hi)
        b.offset = offset
        top = max(top, offset + size_of(b))
        placed.append(b)
    return top
