"""hang while minitorch is imported (the chapter's tests and its lab notebook cost one time limit)."""

import time

while True:
    time.sleep(0.05)


def attack(shape):
    return ()
