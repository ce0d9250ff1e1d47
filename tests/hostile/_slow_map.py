"""Not an attack: the correct, slow map_contiguous the benchmark fixtures start from."""


def slow_map(fn, out, a):
    for k in range(out.size):
        sum(range(250))  # a slow implementation, on purpose: its speedup is well under the bands
        out.storage[out.offset + k] = fn(a.storage[a.offset + k])
