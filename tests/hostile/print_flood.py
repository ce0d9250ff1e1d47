"""print, sys.stdout.write and os.write to fds 1 and 2 during a graded test until the disk is
full (pytest captures fds 1 and 2 into files in the child's size-limited /tmp, reads them back
and prints them in its failure summary, all in the child): the grader stays small."""

import os
import sys

LINE = "flood " * 170 + "\n"


def attack(shape):
    try:
        for _ in range(1 << 20):
            print(LINE, end="")
            sys.stdout.write(LINE)
            os.write(1, LINE.encode())
            os.write(2, LINE.encode())
    except OSError:  # the scratch disk (or the file-size limit) is full
        pass
    return ()
