"""1.7 with another stride for the size-1 dimensions of the new shape: any stride is right there."""

EXERCISE = "1.7"


def variant(shape, strides, new_shape):
    run, expected = 1, []
    for n in reversed(shape):
        expected.append(run)
        run *= n
    expected.reverse()
    if any(s != e and n != 1 for s, e, n in zip(strides, expected, shape)):
        return None
    out, run = [], 1
    for n in reversed(new_shape):
        out.append(1 if n == 1 else run)  # numpy would write something else again: also right
        run *= n
    return tuple(reversed(out))
