"""Call pytest.xfail inside a hypothesis test: an xfail is not a pass."""

import pytest


def attack(shape):
    pytest.xfail("nothing to see here")
