"""The project's own tests. Numba's CUDA simulator must be chosen before Numba is imported."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("MINITORCH_MODE", "reference")
