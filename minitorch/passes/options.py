"""What the compiler pipeline should do beyond chapter 6's passes, in one hashable value.

``jit(fn, options=CompileOptions(fuse=True))`` and ``graph.compile(options=...)``
pass it down to :func:`~minitorch.passes.compile_graph`; it is part of the jit
cache key. Every stage is off by default so chapters 5 and 6 behave as they did;
``minitorch.compile(..., mode=...)`` (chapter 9) turns them on together.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("default", "reduce-overhead", "max-autotune")
GROUPINGS = ("greedy", "planned")  # chapter 7: the greedy fuser (7.2) or your plan (7.11)


@dataclass(frozen=True)
class CompileOptions:
    fuse: bool = False  # chapter 7: group elementwise chains and generate kernels
    memory: bool = False  # chapter 8: place every intermediate in one planned arena
    keep: bool = False  # chapter 9: the arena and the kernels bound to it live as long as the plan
    inplace: bool = True  # chapter 8: let a kernel write over an input that dies there
    mode: str = "default"  # chapter 9: "default" | "reduce-overhead" | "max-autotune"
    parallel: bool = False  # chapter 9: run independent steps on a thread pool
    dynamic: bool = False  # chapter 9: a retrace caused only by a dim's size makes it dynamic
    fast_math: bool = False  # chapter 7: SIMD float32 exp/tanh/sigmoid, within 2 ulp, not bitwise
    grouping: str = "greedy"  # chapter 7: "planned" builds the groups of 7.11's choose_groups

    def __post_init__(self) -> None:
        from ..core.errors import OpError

        for name in ("fuse", "memory", "keep", "inplace", "parallel", "dynamic", "fast_math"):
            if not isinstance(getattr(self, name), bool):
                raise OpError(
                    "CompileOptions",
                    f"{name} must be True or False, got {getattr(self, name)!r}",
                    hint=f"CompileOptions({name}=True)",
                )
        if self.mode not in MODES:
            raise OpError(
                "CompileOptions",
                f"unknown mode {self.mode!r}",
                hint=f"use one of {', '.join(map(repr, MODES))}",
            )

        if self.grouping not in GROUPINGS:
            raise OpError(
                "CompileOptions",
                f"unknown grouping {self.grouping!r}",
                hint=f"use one of {', '.join(map(repr, GROUPINGS))}",
            )

    def __str__(self) -> str:
        on = [
            k
            for k in ("fuse", "memory", "keep", "parallel", "dynamic", "fast_math")
            if getattr(self, k)
        ]
        on += [f"grouping={self.grouping}"] if self.grouping != "greedy" else []
        return f"{self.mode}({', '.join(on) or 'passes only'})"


DEFAULT = CompileOptions()
