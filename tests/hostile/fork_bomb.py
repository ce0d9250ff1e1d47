"""start 200 sleeping processes (bounded: a fork bomb that cannot hurt the test machine)."""

import os
import time


def attack(shape):
    for _ in range(200):
        if os.fork() == 0:
            os.setsid()  # out of the child's process group: only the subreaper finds it
            os.execv("/bin/sleep", ["hostile-bomb", "30"])
    time.sleep(30)
    return tuple(s for s in shape)
