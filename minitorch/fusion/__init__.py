"""Chapter 7: operator fusion. Grouping (``group``, ``reasons``, ``fuse``), the fused node
IR (``ir``); the code generator, kernel cache and runtime live next to them."""

# ruff: noqa: F401  (the exercise functions are importable from minitorch.fusion)

from . import (
    exprs,
    recompute,  # registers the recompute stage (max-autotune)
    row_kernels,  # a max-autotune variant: softmax in three passes
    rows,  # registers the row-group stage (max-autotune)
    share,  # registers the stage sharing GELU's tanh with its gradient (max-autotune)
    slices,  # registers the slice-assembly stage (max-autotune)
)
from .codegen import body_lines, elementwise_source, loop_strides, reduce_source, structure_key
from .codegen_cuda import make_cuda_kernel
from .fuse import fuse, fuse_stage
from .group import (
    Group,
    anchor_rule,
    build_fused_node,
    can_fuse,
    find_groups,
    fusable_op,
    grow_group,
    is_cheap,
    loop_size,
    mark_unfusable,
    reduce_rule,
)
from .ir import FUSED, KERNEL_MAKERS, fused_kernel, inline_fused
from .plan_groups import PLANNED, bytes_moved, choose_groups, fuse_planned, try_plan
from .reasons import REASONS, FusionReport, Refusal
from .runtime import make_kernel

# the CPU backends run fused nodes with generated kernels (codegen 7.6-7.10, runtime)
KERNEL_MAKERS["numpy"] = KERNEL_MAKERS["numba"] = make_kernel
KERNEL_MAKERS["cuda"] = make_cuda_kernel
