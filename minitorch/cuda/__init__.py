"""Chapter 4: the Numba CUDA backend (imported on first use, see backends.base.LAZY)."""
