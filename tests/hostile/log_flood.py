"""print 200 MiB into the child's log at every call (the parent reads and keeps only its tail)."""

import os


def attack(shape):
    line = b"flood " * 170 + b"\n"
    for _ in range(200 * 1024):
        os.write(1, line)
    return ()
