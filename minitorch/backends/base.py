"""The backend interface and the registry of backends.

A backend runs kernels for one device. It finds an op's kernel in the op's own
``kernels`` table (its own name first, then ``"*"`` for kernels every backend
shares, such as views), or builds one from the op's scalar formula
(:meth:`Backend.generic`). Chapter 3 adds ``numba`` and chapter 4 ``cuda``
behind this same interface.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Callable, Iterator

import numpy as np

from ..core.errors import OpError
from ..core.registry import OpDef
from ..tensor.data import TensorData


class Backend:
    name = "base"
    device = "cpu"

    def kernel(self, op: OpDef) -> Callable:
        k = op.kernels.get(self.name) or op.kernels.get("*") or self.generic(op)
        if k is None:
            have = sorted(op.kernels) or ["none"]
            raise OpError(
                op.name,
                f"the {self.name!r} backend has no kernel for this op (kernels: {', '.join(have)})",
                hint="register one with @register_kernel(op, backend) or switch backends "
                "with minitorch.use_backend('numpy')",
            )
        return k

    def generic(self, op: OpDef) -> Callable | None:
        """A kernel built from the op's description alone, or None."""
        return None

    def prepare(self, op: OpDef, out, inputs: list) -> Callable | None:
        """For a compiled plan: ``op``'s kernel specialised to the result spec ``out`` and
        the input specs, taking ``dest=`` (a 1-D array to write into); None: use
        :meth:`kernel` (chapter 8 copies an allocated result into its place).

        A kernel that knows how says so itself: ``kernel.prepare(out, inputs)``."""
        prepare = getattr(self.kernel(op), "prepare", None)
        return prepare(out, inputs) if prepare is not None else None

    # host <-> backend storage
    def from_numpy(self, array: np.ndarray) -> TensorData:
        return TensorData.from_numpy(array)

    def to_numpy(self, data: TensorData) -> np.ndarray:
        return data.to_numpy()

    def copy(self, data: TensorData) -> TensorData:
        """A contiguous copy of ``data`` (used when a view is not possible)."""
        raise NotImplementedError(f"backend {self.name} has no copy()")

    def synchronize(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<backend {self.name} on {self.device}>"


BACKENDS: dict[str, Backend] = {}
# Backends that live in later chapters are imported on first use.
LAZY = {"numba": "minitorch.fast.backend", "cuda": "minitorch.cuda.backend"}
_current = {"cpu": "numpy", "cuda": "cuda"}


def register_backend(backend: Backend) -> Backend:
    BACKENDS[backend.name] = backend
    return backend


def get_backend(name: str) -> Backend:
    if name not in BACKENDS and name in LAZY:
        importlib.import_module(LAZY[name])
    try:
        return BACKENDS[name]
    except KeyError:
        known = sorted(set(BACKENDS) | set(LAZY))
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(known)}") from None


def current(device: str = "cpu") -> Backend:
    """The backend that runs ops on ``device`` now."""
    try:
        return get_backend(_current[device])
    except KeyError:
        raise OpError("device", f"unknown device {device!r}", hint="use 'cpu' or 'cuda'") from None


def set_backend(name: str) -> None:
    """Make ``name`` the backend for its device (``"python"``, ``"numpy"``, ``"numba"``)."""
    b = get_backend(name)
    _current[b.device] = b.name


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[Backend]:
    b = get_backend(name)
    old = _current[b.device]
    _current[b.device] = b.name
    try:
        yield b
    finally:
        _current[b.device] = old
