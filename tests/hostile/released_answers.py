"""Copy an answer out of the graded tests a learner has: 8.2's stub is a lower bound that a
test computed for itself (issue 41: ``test_place._bound``, 3/3; ``util.bound`` the same)."""

EXERCISE = "8.2"


def attack(buffers, alignment):
    from autograder.tests.ch8 import test_place, util

    for helper in (getattr(test_place, "_bound", None), getattr(util, "bound", None)):
        if helper is not None:
            return helper(buffers, alignment)
    raise NotImplementedError("Exercise 8.2: lower_bound")
