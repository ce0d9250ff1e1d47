"""Why a merge was refused: a fixed vocabulary, one record per refusal, a report.

Every time the fuser declines to put a producer into a consumer's group it
records a :class:`Refusal` naming both nodes and one of the :data:`REASONS`.
``minitorch.explain`` and the ``NN-fused.txt`` dump print them as a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..tracing.graph import Node

SPACE = "different iteration space"
REDUCTION = "a reduction in the way"
OUTSIDE = "value needed outside the group"
ANCHOR = "anchor with no fusable epilogue"
LIMIT = "size limit"
UNFUSABLE = "op marked unfusable / no scalar formula"
CYCLE = "would create a cycle"

REASONS = (SPACE, REDUCTION, OUTSIDE, ANCHOR, LIMIT, UNFUSABLE, CYCLE)

# A fused kernel takes its inputs as arguments and unrolls its ops into one loop
# body: both stay small enough for Numba/CUDA to compile quickly.
MAX_OPS = 32
MAX_INPUTS = 16


@dataclass(frozen=True)
class Refusal:
    """``producer`` was not merged into the group of ``consumer`` because of ``reason``."""

    producer: Node
    consumer: Node | None
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        who = f"%{self.producer.name} ({self.producer.op})"
        into = f"%{self.consumer.name} ({self.consumer.op})" if self.consumer else "-"
        more = f": {self.detail}" if self.detail else ""
        return f"{who} -> {into}: {self.reason}{more}"


@dataclass
class FusionReport:
    """What one run of the fuser did to one graph."""

    groups: list = field(default_factory=list)  # the fused nodes made, in graph order
    refusals: list = field(default_factory=list)  # Refusal, in the order they happened
    recomputed: list = field(default_factory=list)  # (original node, the group's copy)
    nodes_before: int = 0
    nodes_after: int = 0
    unfused: list = field(default_factory=list)  # (group name, why): ops run as steps (cuda)

    def reasons(self) -> dict:
        """``{reason: count}`` over the refusals."""
        out: dict[str, int] = {}
        for r in self.refusals:
            out[r.reason] = out.get(r.reason, 0) + 1
        return out

    def lines(self) -> list[str]:
        """The report as text lines: groups, then the refusal table."""
        out = [
            f"fusion: {self.nodes_before} -> {self.nodes_after} ops, {len(self.groups)} group(s)"
        ]
        for n in self.groups:
            sub = n.attrs["graph"]
            ops = " ".join(m.op for m in sub.ops)
            out.append(f"  {n.attrs['name']} [{n.attrs['kind']}] %{n.name}: {ops}")
        for orig, copy in self.recomputed:
            out.append(f"  recomputed %{orig.name} ({orig.op}) inside a group as %{copy.name}")
        for name, why in self.unfused:
            out.append(f"  {name} unfused: its ops run as steps on cuda ({why})")
        if self.refusals:
            out.append("  not fused (producer -> consumer: reason):")
            out += [f"    {r}" for r in self.refusals]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())
