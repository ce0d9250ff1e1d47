"""send check records without end on the results pipe (the parent stops it; its results are void)."""

import sys


def attack(shape):
    wire = sys.modules["autograder.wire"]
    while True:
        wire.send_check("truth", ok=True)
