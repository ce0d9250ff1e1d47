"""Write pass records into every pipe, including a second `start`, then exit at once."""

import json
import os
import stat


def attack(shape):
    node = "autograder/tests/ch1/test_indexing.py::test_strides_from_shape"
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                for rec in (
                    {"event": "start", "nodeid": node},
                    {"event": "result", "nodeid": node, "outcome": "passed", "duration": 1},
                ):
                    os.write(fd, (json.dumps(rec) + "\n").encode())
        except OSError:
            pass
    os._exit(0)
