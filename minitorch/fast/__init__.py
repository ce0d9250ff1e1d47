"""Chapter 3: the Numba CPU backend (imported on first use, see backends.base.LAZY)."""
