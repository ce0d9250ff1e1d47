"""write exactly the record the plugin would write for the running test, then exit."""

import json
import os
import stat


def attack(shape):
    node = "autograder/tests/ch1/test_indexing.py::test_strides_from_shape"
    record = {"event": "result", "nodeid": node, "outcome": "passed", "duration": 0.1,
              "figures": {}}  # fmt: skip
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, (json.dumps(record) + "\n").encode())
        except OSError:
            pass
    os._exit(0)
