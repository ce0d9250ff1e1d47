"""send check records just under the grader's record limit (two arrays of 128k elements each,
2.8 MB), as many as a test may send: writing them costs the child almost no CPU, parsing and
judging them costs the parent much more."""

import base64
import json
import sys

ARRAY = {"dtype": "<f8", "shape": [1 << 17], "data": base64.b64encode(bytes(8 << 17)).decode()}


def attack(shape):
    wire = sys.modules["autograder.wire"]
    record = {"event": "check", "nodeid": wire.current[0], "how": "close", "error": "",
              "actual": ARRAY, "expected": ARRAY, "rtol": 0.01, "atol": 0.01}  # fmt: skip
    line = (json.dumps(record) + "\n").encode()
    for _ in range(100_000):
        wire._write(line)
    return ()
