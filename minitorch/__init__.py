"""minitorch: a deep-learning framework built in stages, from eager tensors to a small compiler."""

# Order matters: ops, then backends, then the chapters that hang on them)
from .core import ops as _ops  # noqa: F401  (registers the built-in op set)
from .core import conv_ops as _conv_ops  # noqa: F401  (chapter 3's ops)
from . import backends  # noqa: F401  (registers the CPU backends)
from .backends import current as current_backend
from .backends import get_backend, set_backend, use_backend
from .core.creation import (
    arange,
    full,
    manual_seed,
    ones,
    ones_like,
    rand,
    randn,
    tensor,
    where,
    zeros,
    zeros_like,
)
from .core.dtypes import bool_, float32, float64, int64
from .core.errors import OpError
from .core.registry import (
    OPS,
    OpKind,
    Spec,
    dispatch,
    get_op,
    register_kernel,
    register_op,
    register_vjp,
)
from .core.tensor import Tensor, enable_grad, is_grad_enabled, no_grad
from .exercises import get_mode, set_mode

from . import nn  # chapter 2
from .nn import optim  # chapter 2
from .autograd import *  # noqa: F403  chapter 2
from .tracing import *  # noqa: F403  chapter 5
from . import autograd, tracing
from . import passes  # chapter 6
from .passes import CompileOptions, register_pass
from . import fusion  # chapter 7
from . import memory  # chapter 8
from .memory import memory_summary, temp_allocator, track_memory
from . import profiler  # chapter 10
from .compile.dynamic import mark_dynamic  # chapter 9
from .compile import compile  # noqa: A004  chapter 9 (the function shadows the package)
from . import transformer  # chapter 11
from . import distributed  # chapter 12 (mpi4py is imported only when a rank talks)

__all__ = [
    "OPS",
    "OpError",
    "OpKind",
    "Spec",
    "Tensor",
    "arange",
    "bool_",
    "current_backend",
    "dispatch",
    "enable_grad",
    "float32",
    "float64",
    "full",
    "get_backend",
    "get_mode",
    "get_op",
    "int64",
    "is_grad_enabled",
    "manual_seed",
    "mark_dynamic",
    "no_grad",
    "ones",
    "ones_like",
    "rand",
    "randn",
    "register_kernel",
    "register_op",
    "register_vjp",
    "set_backend",
    "set_mode",
    "tensor",
    "use_backend",
    "where",
    "zeros",
    "zeros_like",
    "synchronize",
    "nn",
    "optim",
    "passes",
    "fusion",
    "register_pass",
    "CompileOptions",
    "memory",
    "memory_summary",
    "temp_allocator",
    "track_memory",
    "profiler",
    "compile",
    "mark_dynamic",
    "transformer",
    *autograd.__all__,
    *tracing.__all__,
]


def __getattr__(name: str):
    """``minitorch.onnx`` is imported on first use (it needs the ``onnx`` package)."""
    if name == "onnx":
        import importlib

        return importlib.import_module(".onnx", __name__)
    raise AttributeError(f"module 'minitorch' has no attribute {name!r}")


def synchronize(device: str = "cuda") -> None:
    """Wait for queued device work to finish, e.g. before stopping a timer (a no-op on the CPU)."""
    current_backend(device).synchronize()
