"""A rewrite pass of your own: chapter 6's open exercise (6.11), graded on its outcome.

``simplify_more`` runs in the pipeline ``MORE_PIPELINE`` (``cse, fold, simplify,
simplify_more, dce``): ``minitorch.jit(fn, passes=MORE_PIPELINE)``. It goes
through the same pass manager as the built-in passes, so ``explain`` and the
dumps (``MINITORCH_DUMP_GRAPH``) show what it did.
"""

from __future__ import annotations

from ..core import dtypes as dt  # noqa: F401  (for your rules)
from ..exercises import exercise
from ..tracing.graph import Graph
from .patterns import Pattern, apply_patterns, const_array, is_all  # noqa: F401
from .rewrite import is_frozen, is_pure, make_const, replace_all_uses, set_input  # noqa: F401


@exercise("6.11")
def simplify_more(graph: Graph) -> int:
    """Rewrite ``graph`` in place so it computes the same with fewer ops; return how many rewrites.

    Any rewrite is allowed, on one condition: the compiled program must give
    eager's answer bit for bit on every input: NaN, inf, -inf and -0.0 (its
    sign) included, integer and bool dtypes, broadcasting, every output's
    shape and dtype. Count one rewrite per node you replace (its uses rerouted
    to another node) or change in place; return 0 exactly when the graph is
    unchanged (the pass manager stops when every pass returns 0). Leave dead
    nodes to ``dce``, which runs after you.

    It is graded on a fixed suite of small models with redundancies that the
    built-in passes (6.2-6.7) leave in place, run with ``MORE_PIPELINE``: the
    fewer ops (nodes other than inputs and constants) remain, the more points.
    Trap programs, where a rule that looks right changes some output bit,
    check that you kept eager's answer. Which rewrites you implement is yours.

    Example:
        >>> print(g)      # %1 = abs(%x) ; %2 = abs(%1) ; return (%2)
        >>> simplify_more(g)
        1
        >>> g.outputs     # abs is idempotent, NaN and -0.0 included
        [%1]

    Hints: book chapter 6, "The exercises".
    """
    raise NotImplementedError("Exercise 6.11: simplify_more")
