"""The project's own tests. Numba's CUDA simulator must be chosen before Numba is imported."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("MINITORCH_MODE", "reference")

# Hostile submissions are planted into a grading tree by test_grader_hostile.py; collected here
# (their names match bench_*.py) their import would rebind this process's clocks and classes.
collect_ignore = ["hostile"]
