"""Chapter 9: compiled training (``minitorch.compile``), its modes, dynamic shapes, parallel scheduling.

``minitorch.compile(step)`` traces a whole training step (forward, the
backward built from the registry's VJPs, the optimizer's update) into one
graph and runs it through the compiler pipeline of chapters 6-8; the mode
chooses how the plan runs. On an ``nn.Module`` (or a function that trains
nothing) it is ``jit`` with the mode's options: parameters are graph inputs.
"""

from __future__ import annotations

from ..core.errors import OpError
from ..passes.options import CompileOptions
from ..tracing.jit import check_arguments
from . import parallel  # noqa: F401  (registers the parallel stage)
from .autotune import autotune_choice, tune_plan
from .backward import backward_graph, backward_order, saved_activations
from .remat import choose_recompute, peak_bytes, recompute_work, rematerialize
from .runner import build_function, donations, plan_source
from .step import CompiledStep, find_state, step_outputs, write_back

MODES = {
    mode: CompileOptions(fuse=True, memory=True, keep=True, mode=mode, dynamic=True)
    for mode in ("default", "reduce-overhead", "max-autotune")
}


def options_for(mode: str) -> CompileOptions:
    if not isinstance(mode, str) or mode not in MODES:  # a list is not hashable
        raise OpError(
            "compile",
            f"unknown mode {mode!r}"
            + ("" if isinstance(mode, str) else f" (a {type(mode).__name__})"),
            hint=f"use one of {', '.join(repr(m) for m in MODES)}",
        )
    return MODES[mode]


def compile(model_or_fn=None, *, mode: str = "default", fullgraph: bool = False, debug=False):  # noqa: A001
    """Compile a training step, a function or an ``nn.Module`` with the stages of ``mode``.

    * ``"default"``: graph passes, fusion (chapter 7) and memory planning (chapter 8);
    * ``"reduce-overhead"``: the same, and the plan runs as one generated function
      (dumped as ``runner.py``);
    * ``"max-autotune"``: the same, and each matmul, convolution, pool, softmax and
      their gradients uses the kernel (numpy, Numba or a variant) measured fastest for
      its shapes, remembered on disk; a row's sums and means with the arithmetic around
      them run as one generated loop per row (``fusion/rows.py``) and the gradients of
      slices cut from one tensor are written into one buffer (``fusion/slices.py``);
      a matmul writes attention's merged heads in place and a cheap op is recomputed
      where it is read instead of stored (``fusion/recompute.py``), and a GELU's gradient
      reads the forward's ``tanh`` (``fusion/share.py``), with eager's bits.

    A step function may call ``loss.backward()``, ``opt.zero_grad()`` and ``opt.step()``:
    they are traced into the step's graph, and the new parameters, gradients and
    optimizer buffers are written back after each call. ``fullgraph=True`` makes a
    graph break an error instead of running the function eagerly.
    """
    options = options_for(mode)
    if model_or_fn is None:
        return lambda f: compile(f, mode=mode, fullgraph=fullgraph, debug=debug)
    check_arguments("compile", model_or_fn, fullgraph=fullgraph, debug=debug)
    from ..nn.module import Module

    if isinstance(model_or_fn, Module):
        from ..tracing.jit import jit

        return jit(model_or_fn, fullgraph=fullgraph, debug=debug, options=options)
    return CompiledStep(model_or_fn, options, fullgraph=fullgraph, debug=debug)


__all__ = [
    "MODES",
    "CompiledStep",
    "autotune_choice",
    "backward_graph",
    "backward_order",
    "build_function",
    "choose_recompute",
    "compile",
    "donations",
    "find_state",
    "options_for",
    "peak_bytes",
    "plan_source",
    "recompute_work",
    "rematerialize",
    "saved_activations",
    "step_outputs",
    "tune_plan",
    "write_back",
]
