"""Write garbage, a huge line and a fraction far above 1 into every pipe."""

import os
import stat


def attack(shape):
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b'{"event": "result", "nodeid": [1], "fraction": 4039}\n')
                os.write(fd, b"not json at all [/] \n" + b"x" * 100_000)
        except OSError:
            pass
    raise NotImplementedError("Exercise 1.3: strides_from_shape")
