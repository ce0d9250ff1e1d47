"""Graded tests load the grader's plugin, so plain pytest on one file works too."""

from autograder.plugin import *  # noqa: F403
