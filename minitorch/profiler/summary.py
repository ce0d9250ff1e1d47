"""The per-op table: self time (exercise 10.2), one row per name (exercise 10.3), formatting."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import OpError
from ..exercises import exercise
from .core import Event


@dataclass
class Row:
    """One line of ``prof.table()``: every event with the same name, together."""

    name: str
    calls: int = 0
    total: int = 0  # ns, inclusive of nested events
    self: int = 0  # ns, without the time of events nested inside
    alloc: int = 0  # bytes
    freed: int = 0  # bytes
    share: float = 0.0  # self / the sum of all self times

    @property
    def mean(self) -> float:
        return self.total / self.calls if self.calls else 0.0


SORT_KEYS = ("total", "self", "calls", "mean", "alloc", "freed", "name")


@exercise("10.2")
def self_times(events: list[Event]) -> list[int]:
    """The self time of every event: its duration minus that of its direct children.

    An event B is nested in A when both ran on the same thread (``tid``) and
    ``A.start <= B.start`` and ``B.end <= A.end``; B is a *direct* child of the
    innermost such A. Events of different threads never nest. Return one
    integer per event, in the order of ``events`` (which is arbitrary: a parent
    is recorded after its children finish).

    Example (times in ns, one thread)::

        A: 0..100,  B: 10..40 (inside A),  C: 20..30 (inside B)
        self_times([A, B, C]) == [70, 20, 10]
    """
    raise NotImplementedError("Exercise 10.2: self_times")


@exercise("10.3")
def summarize(events: list[Event]) -> list[Row]:
    """Group ``events`` by name into :class:`Row` s, in order of first appearance.

    For each name: ``calls`` (how many events), ``total`` (sum of durations),
    ``self`` (sum of :func:`self_times`), ``alloc`` and ``freed`` (sums of the
    events' bytes) and ``share`` = this row's ``self`` / the sum of ``self``
    over all events (0.0 when that sum is 0). ``mean`` is computed by ``Row``.

    Example:
        >>> rows = summarize(prof.events)
        >>> rows[0].name, rows[0].calls
        ('matmul', 3)
    """
    raise NotImplementedError("Exercise 10.3: summarize")


def sort_rows(rows: list[Row], sort_by: str = "total") -> list[Row]:
    if sort_by not in SORT_KEYS:
        raise OpError(
            "profile.table", f"cannot sort by {sort_by!r}", hint=f"use one of {SORT_KEYS}"
        )
    if sort_by == "name":
        return sorted(rows, key=lambda r: r.name)
    return sorted(rows, key=lambda r: (-getattr(r, sort_by), r.name))


def _time(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} us"


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def format_table(rows: list[Row], limit: int | None = 20) -> str:
    """The familiar per-op summary as text: one line per row, a total line at the end."""
    head = ("name", "calls", "total", "self", "mean", "self %", "alloc", "freed")
    lines = [
        (r.name, str(r.calls), _time(r.total), _time(r.self), _time(r.mean))
        + (f"{100 * r.share:.1f}%", _bytes(r.alloc), _bytes(r.freed))
        for r in rows[:limit]
    ]
    if limit is not None and len(rows) > limit:
        lines.append((f"... {len(rows) - limit} more", "", "", "", "", "", "", ""))
    self_sum = sum(r.self for r in rows)
    lines.append(
        ("total", str(sum(r.calls for r in rows)), "", _time(self_sum), "", "100.0%", "", "")
    )
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]

    def fmt(cells):
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    rule = "-" * len(fmt(head))
    return "\n".join([fmt(head), rule, *map(fmt, lines[:-1]), rule, fmt(lines[-1])])
