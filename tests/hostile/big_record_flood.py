"""send check records just under the grader's record limit, as many as a test may send, each
carrying two arrays of 128k elements (the parent parses and judges each one)."""

import base64
import json
import os
import sys

import numpy as np


def attack(shape):
    wire = sys.modules["autograder.wire"]
    arr = {"dtype": "<f8", "shape": [1 << 17], "data": base64.b64encode(np.zeros(1 << 17).tobytes()).decode()}
    line = (json.dumps({"event": "check", "nodeid": wire.current[0], "how": "close", "error": "",
                        "actual": arr, "expected": arr, "rtol": 0.01, "atol": 0.01}) + "\n").encode()
    for _ in range(100_000):
        wire._write(line)
    return ()
