"""Backends: ``python`` and ``numpy`` on the CPU here; ``numba`` and ``cuda`` in chapters 3 and 4."""

from . import numpy_backend, python_backend, views  # noqa: F401  (register themselves)
from .base import (
    BACKENDS,
    Backend,
    current,
    get_backend,
    register_backend,
    set_backend,
    use_backend,
)

__all__ = [
    "BACKENDS",
    "Backend",
    "current",
    "get_backend",
    "register_backend",
    "set_backend",
    "use_backend",
]
