"""Chapter 6: graph passes (DCE, CSE, folding, pattern rewrites), the pass manager, the plan."""

# ruff: noqa: F401  (the exercise functions are importable from minitorch.passes)

from .cleanup import COMMUTATIVE, common_subexpressions, const_key, dead_code_elimination
from .extra import simplify_more
from .fold import FOLD_LIMIT, constant_fold
from .manager import (
    DEFAULT_PIPELINE,
    MORE_PIPELINE,
    PASSES,
    PassStat,
    optimize,
    register_pass,
    resolve,
    run_to_fixed_point,
)
from .options import CompileOptions
from .patterns import (
    SAFE,
    UNSAFE,
    Pattern,
    apply_patterns,
    compose_views,
    identity_operand,
    pattern,
)
from .pipeline import STAGES, CompileUnit, Stage, compile_graph, register_stage
from .plan import CompiledPlan, Plan, Step, kernel_for, lower, run_plan
from .rewrite import (
    attrs_key,
    clone_graph,
    is_frozen,
    is_pure,
    make_const,
    mark_impure,
    mark_pure,
    replace_all_uses,
    set_input,
)

__all__ = ["CompileOptions", "CompiledPlan", "PassStat", "register_pass"]
