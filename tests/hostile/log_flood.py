"""print into the log up to its file-size limit (256 MiB) while minitorch is imported (before
pytest captures output), then exit: the parent reads only the log's tail for the message, and
keeps only that once the child has ended."""

import os

line = b"flood " * 170 + b"\n"
try:
    for _ in range(300 * 1024):
        os.write(1, line)
except OSError:  # the file-size limit
    pass
os._exit(3)


def attack(shape):
    return ()
