"""What a grading child may say, and what the parent makes of it.

A child writes JSON lines to a pipe the parent opened: ``ready`` once it has
imported ``minitorch``, then for each test ``start``, its ``check`` records,
for a benchmark ``sides``/``sampled``/``output`` records (``bench.py``), and
one ``result``. :class:`Protocol` reads one child's lines in that order,
judges every check with the parent's own numpy and the references' recorded
values (``judge.py``, ``oracle.py``), and turns each result into a
:class:`Result`. Anything out of schema or out of order voids the child's
results with a reason (:class:`Forged`): the child is learner code.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from .. import config
from . import oracle as oracle_mod
from .judge import decide
from .manifest import Item

OUTCOMES = ("passed", "failed", "skipped")
CHECK_FIELDS = {"event", "nodeid", "how", "error", "ok", "actual", "expected", "rtol", "atol",
                "sampled", "value", "inputs"}  # fmt: skip
RESULT_FIELDS = {"event", "nodeid", "outcome", "duration", "message", "where", "figures"}


def clean(text: str, limit: int, keep: str = "\n\t") -> str:
    """Learner text as the report may show it: control characters but ``keep`` escaped (no
    terminal sequence can rewrite the report), cut to ``limit``."""
    text = "".join(c if c in keep or c.isprintable() else ascii(c)[1:-1]
                   for c in str(text)[: 4 * limit])  # fmt: skip
    return text if len(text) <= limit else text[:limit] + " ... (cut)"


@dataclass
class Result:
    item: Item
    status: str  # passed | failed | crashed | timeout | not run | excluded
    score: float = 0.0
    message: str = ""
    where: str = ""
    figures: dict = field(default_factory=dict)
    duration: float = 0.0

    def __post_init__(self):
        self.message = clean(self.message, config.MESSAGE_LIMIT)
        self.where = clean(self.where, 300)
        self.figures = {clean(k, 64): v for k, v in self.figures.items()}

    @property
    def counted(self) -> bool:
        return self.status != "excluded"


class Forged(Exception):
    """A record on the results pipe that the grader's own child code would not have written."""


def _finite(x) -> bool:
    return type(x) in (int, float) and math.isfinite(x)


def parse(line: bytes, asked: set[str]) -> dict:
    """One record, checked field by field; raises :class:`Forged`."""
    try:
        ev = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Forged("a line that is not JSON") from None
    if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
        raise Forged("a record of unknown kind")
    kind = ev["event"]
    if kind == "ready":
        if set(ev) != {"event"}:
            raise Forged("a ready record with extra fields")
        return ev
    if kind in ("sides", "sampled", "output", "fresh", "cell", "ran"):  # their readers check
        return ev
    if kind not in ("start", "check", "result"):
        raise Forged("a record of unknown kind")
    if not isinstance(ev.get("nodeid"), str) or ev["nodeid"] not in asked:
        raise Forged(f"a record for a test that was not asked for: {str(ev.get('nodeid'))[:80]!r}")
    if kind == "start" and set(ev) != {"event", "nodeid"}:
        raise Forged("a start record with extra fields")
    if kind == "check" and not set(ev) <= CHECK_FIELDS:
        raise Forged("a check record with extra fields")
    if kind == "result":
        figures = ev.get("figures", {})
        if (
            not set(ev) <= RESULT_FIELDS
            or ev.get("outcome") not in OUTCOMES
            or not _finite(ev.get("duration"))
            or not isinstance(ev.get("message", ""), str)
            or not isinstance(ev.get("where", ""), str)
            or not isinstance(figures, dict)
            or len(figures) > 32
            or not all(
                isinstance(k, str) and len(k) < 64 and _finite(v) for k, v in figures.items()
            )
        ):
            raise Forged("a result record that does not fit the schema")
    return ev


def band_fraction(value: float, bands, higher_is_better: bool = True) -> float:
    """The fraction of a benchmark's points for ``value``, from the grader's own bands."""
    for threshold, fraction in bands:
        if (value >= threshold) if higher_is_better else (value <= threshold):
            return min(1.0, max(0.0, float(fraction)))
    return 0.0


def shown(value: float, threshold: float) -> str:
    """``value`` with enough digits that it never prints as the threshold it missed."""
    for digits in range(3, 8):
        text = f"{value:.{digits}g}"
        if float(text) != threshold or value == threshold:
            return text
    return repr(value)


def full_credit(item: Item) -> str:
    """``"lower is better; full credit at 16 or below"``: which way the figure should go."""
    if item.higher_is_better:
        return f"higher is better; full credit at {item.bands[0][0]:g} or above"
    return f"lower is better; full credit at {item.bands[0][0]:g} or below"


def score(item: Item, ev: dict, checks: tuple[int, str] = (0, ""), figure: float | None = None,
          why: str = "") -> Result:  # fmt: skip
    """The verdict on one result record, given ``checks`` (how many of the test's check
    records held, and why the first that did not failed) and, for a benchmark with a
    formula, the ``figure`` the parent computed from its own timings (``why``: none)."""
    outcome, figures = ev["outcome"], dict(ev.get("figures", {}))
    msg, where, duration = ev.get("message", ""), ev.get("where", ""), max(0.0, ev["duration"])
    held, refused = checks
    if outcome == "passed" and refused:
        outcome, msg = "failed", refused
    elif outcome == "passed" and held < item.checks:
        outcome, msg = "failed", ("reported a pass without the comparisons the test makes "
                                  "(the grader received none)")  # fmt: skip
    if outcome == "passed" and item.kind == "benchmark":
        if item.formula:  # the parent's figure, never the child's
            figures.pop(item.metric, None)
            if figure is None:
                return Result(item, "failed", 0.0, f"not timed: {why or 'no timings'}", where,
                              figures, duration)  # fmt: skip
            figures[item.metric] = figure
        value = figures.get(item.metric)
        if value is None:
            return Result(item, "failed", 0.0, f"benchmark reported no {item.metric!r}", where,
                          figures, duration)  # fmt: skip
        fraction = band_fraction(value, item.bands, item.higher_is_better)
        if fraction < 1.0:
            msg = f"{item.metric} {shown(value, item.bands[0][0])} ({full_credit(item)})"
        status = "passed" if fraction >= 1.0 else "failed"
        return Result(item, status, item.points * fraction, msg, where, figures, duration)
    if outcome == "passed":
        return Result(item, "passed", item.points, "", where, figures, duration)
    if outcome == "skipped" and item.needs == "gpu":
        return Result(item, "excluded", 0.0, msg or "not run: no GPU", "", figures)
    if outcome == "skipped":
        msg = f"skipped ({msg}); a skipped test earns nothing"
    if item.kind == "benchmark" and why:  # what went wrong while the parent timed it
        msg = f"{why}\n{msg}"
    return Result(item, "failed", 0.0, msg, where, figures, duration)


@dataclass
class Protocol:
    """One child's records, in order: the state the parent keeps while a child runs tests.

    :meth:`feed` takes one parsed record and returns it (or raises :class:`Forged`);
    ``results`` fills as tests end. ``bench`` (``bench.py``) adds a benchmark's
    figure before its result is scored."""

    items: dict[str, Item]
    oracle: dict[str, list]
    recording: dict[str, list] | None = None
    imported: bool = False
    started: bool = False
    current: str | None = None
    held: int = 0  # the running test's check records that held
    refused: str = ""  # why the first one that did not failed
    seen: int = 0  # how many it sent
    expected: list | None = None  # the reference run's, if recorded
    figure: tuple[float | None, str] = (None, "")  # a benchmark's, from bench.py
    results: dict[str, Result] = field(default_factory=dict)

    def feed(self, ev: dict) -> dict:
        kind = ev["event"]
        if kind == "ready":
            if self.imported or self.started:
                raise Forged("a second ready record")
            self.imported = True
            return ev
        if kind in ("sides", "sampled", "output", "fresh"):
            if self.current is None or self.items[self.current].kind != "benchmark":
                raise Forged(f"a {kind} record outside a benchmark")
            return ev
        if kind in ("cell", "ran"):
            raise Forged(f"a {kind} record from a test")
        node = ev["nodeid"]
        if kind == "check":
            if node != self.current or self.seen >= config.CHECK_LIMIT:
                raise Forged(f"a check record out of order for {node[-60:]}")
            ok, why = decide(ev)
            if ok and self.expected is not None:
                ok, why = oracle_mod.judge(self.expected, self.seen, ev)
            if self.recording is not None:
                self.recording.setdefault(node, []).append(oracle_mod.entry(ev))
            self.seen += 1
            self.held += ok
            self.refused = self.refused or ("" if ok else why or "failed")
            return ev
        if node in self.results or (kind == "result") != (node == self.current):
            raise Forged(f"a record out of order for {node.split('::')[-1]}")
        if kind == "start":
            self.started, self.current = True, node
            self.held, self.refused, self.seen = 0, "", 0
            self.expected, self.figure = self.oracle.get(node), (None, "")
            if self.recording is not None:
                self.recording[node] = []
            return ev
        if self.expected is not None and self.seen < len(self.expected) and not self.refused:
            self.refused = f"{self.seen} comparisons, the reference run makes {len(self.expected)}"
        self.results[node] = score(self.items[node], ev, (self.held, self.refused), *self.figure)
        self.current = None
        return ev
