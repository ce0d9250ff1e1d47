"""Chapter 7: operator fusion and code generation."""

# ruff: noqa: F401
from . import exprs
from .codegen import body_lines, elementwise_source, loop_strides, reduce_source, structure_key
from .runtime import make_kernel
