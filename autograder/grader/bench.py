"""A benchmark's figure, measured by the parent.

A benchmark runs twice at once: in the learner's child (L), which times every
side the decorator does not name in ``baseline``, and in a child of the
course's own code in reference mode (G: the same benchmark function on the
instructor's package and references), which times the baseline sides and
computes what each of L's sides must return. Both call ``harness.compare``,
which reports its sides and then does what the parent says
(``autograder/harness.py``); the parent here:

1. asks G for the result of each of L's sides (the expected values);
2. warms every side up, then chooses how many calls make a sample of at least
   :data:`config.MIN_SAMPLE` of CPU time;
3. takes one sample of each side per round, in alternating order, reading the
   sampling child's CPU clock before and after (from outside: a rebound clock
   in the child changes nothing). In official grading a child cannot start
   processes, so its clock is all its work. While G samples, L is stopped: no
   thread of the learner's can slow the baseline;
4. after each of L's samples, compares the result of its last call with G's;
   reading it is timed too, and may not take much longer than reading G's (a
   result that computes only when read would otherwise escape the timing);
5. computes the decorator's ``formula`` from each side's fastest sample.

A figure without a ``formula`` (memory, traffic) is the one the benchmark
reports; the report says which figures are the parent's.
"""

from __future__ import annotations

import ast
import operator
import signal
import time
from dataclasses import dataclass, field

from .. import config
from .judge import decide
from .manifest import Item

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv}  # fmt: skip


def figure(formula: str, best: dict[str, float]) -> float:
    """``formula`` (``"numpy / fused"``, ``min(a / b, c / d)``) over the sides' best times."""

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return float(node.value)
        if isinstance(node, ast.Name):
            return best[node.id]
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("min", "max"):
            return (min if node.func.id == "min" else max)(ev(a) for a in node.args)
        raise ValueError(f"not allowed in a formula: {ast.dump(node)[:60]}")

    return float(ev(ast.parse(formula, mode="eval")))


class Failed(Exception):
    """The benchmark cannot be timed (a side failed, a wrong result, a child that stopped)."""


@dataclass
class Bench:
    """One benchmark's compares. ``learner`` and ``baseline`` read records from L and G:
    ``(child, timeout) -> record or None``; ``start_baseline`` starts G on first use."""

    item: Item
    learner: object  # children.Child
    read: object  # (child, seconds) -> dict | None
    start_baseline: object  # () -> Child | str
    baseline: object = None
    samples: dict[str, list[float]] = field(default_factory=dict)
    problem: str = ""
    deadline: float = 0.0

    def __post_init__(self):
        self.deadline = time.monotonic() + config.WALL_FACTOR * config.BENCH_TIMEOUT

    def _next(self, child, kinds: tuple[str, ...]) -> dict:
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise Failed("the benchmark ran out of time")
            ev = self.read(child, left)
            if ev is None:
                who = "the course's own code" if child is self.baseline else "the benchmark"
                raise Failed(f"{who} stopped while being timed")
            if ev["event"] in kinds:
                return ev
            if ev["event"] == "result":
                raise Failed("the benchmark ended while being timed")

    def compare(self, ev: dict) -> None:
        """L reached a ``compare`` (its ``sides`` record ``ev``): time it; on any failure,
        :attr:`problem` says why and both children are told to stop."""
        try:
            self._compare(ev)
        except Failed as e:
            self.problem = self.problem or str(e)
            for child in (self.learner, self.baseline):
                if child is not None and not isinstance(child, str):
                    child.signal(signal.SIGCONT)
                    child.send({"do": "done", "samples": {}})

    def _compare(self, ev: dict) -> None:
        if self.problem:
            raise Failed(self.problem)
        if not self.item.formula:
            raise Failed("this benchmark is not timed by the grader")
        if self.baseline is None:
            self.baseline = self.start_baseline()
        if isinstance(self.baseline, str):
            raise Failed(f"the course's own code could not start: {self.baseline[:300]}")
        theirs = self._next(self.baseline, ("sides",))
        sides = [s for s in theirs.get("sides", []) if isinstance(s, str)]
        if ev.get("sides") != sides:
            raise Failed(f"the benchmark compares {ev.get('sides')}, the course's own code {sides}")
        tol = theirs.get("tol") or [1e-5, 1e-6]
        owner = {s: self.baseline if s in self.item.baseline else self.learner for s in sides}
        expected = {}
        for side in sides:  # what L's sides must return, and how long reading it takes
            if owner[side] is self.learner:
                self._do(self.baseline, "expect", side)
                expected[side] = self._output(self.baseline, side)
        loops = {side: self._calibrate(owner[side], side) for side in sides}
        got = {side: [] for side in sides}
        for r in range(7):
            for side in sides if r % 2 == 0 else sides[::-1]:
                got[side].append(self._sample(owner[side], side, loops[side]) / loops[side])
                if owner[side] is self.learner:
                    self._check(side, expected[side], tol)
        for side, times in got.items():
            self.samples.setdefault(side, []).extend(times)
        for child in (self.learner, self.baseline):
            child.send({"do": "done", "samples": got})

    def _do(self, child, do: str, side: str, n: int = 1, kind: str = "sampled") -> dict:
        """One command; the child's answer."""
        if not child.send({"do": do, "side": side, "n": n}):
            raise Failed("the benchmark's command pipe is closed")
        answer = self._next(child, (kind,))
        if answer.get("error") or answer.get("side") != side:
            raise Failed(f"{do} {side} failed: {str(answer.get('error'))[:200]}")
        return answer

    def _sample(self, child, side: str, n: int) -> float:
        """CPU seconds ``child`` spends on ``n`` calls of ``side``, read from outside."""
        other = self.learner if child is self.baseline else None
        if other is not None:  # nothing of the learner's runs while a baseline is timed
            other.signal(signal.SIGSTOP)
        try:
            self._do(child, "collect", side)  # a garbage collection first, outside the timing
            before = child.cpu()
            self._do(child, "sample", side, n)
            return max(child.cpu() - before, 1e-9)
        finally:
            if other is not None:
                other.signal(signal.SIGCONT)

    def _output(self, child, side: str) -> dict:
        """The last result of ``side``, made plain; with the CPU seconds that took."""
        before = child.cpu()
        got = self._do(child, "output", side, kind="output")
        if got.get("value") is None:
            raise Failed(f"{side} returned {str(got.get('error'))[:200] or 'nothing'}")
        return {**got, "seconds": child.cpu() - before}

    def _calibrate(self, child, side: str) -> int:
        for _ in range(2):  # warm up: compilation, caches, thread pools
            self._sample(child, side, 1)
        n = 1
        while n < 1 << 20 and self._sample(child, side, n) < config.MIN_SAMPLE:
            n *= 2
        return n

    def _check(self, side: str, expected: dict, tol) -> None:
        """The last result of a sample of L's ``side`` against the course's own, read as fast."""
        got = self._output(self.learner, side)
        ok, why = decide({"how": "close", "actual": got["value"], "expected": expected["value"],
                          "rtol": float(tol[0]), "atol": float(tol[1])})  # fmt: skip
        if not ok:
            raise Failed(f"{side} returned a wrong result while timed: {why}")
        if got["seconds"] > config.READ_FACTOR * expected["seconds"] + config.READ_SLACK:
            raise Failed(f"{side}'s result took {got['seconds'] * 1e3:.1f} ms to read, the course's "
                         f"{expected['seconds'] * 1e3:.1f} ms: a result must be computed when "
                         "returned, not when read")  # fmt: skip
        self._do(self.learner, "verify", side)

    def figure(self) -> tuple[float | None, str]:
        """The graded figure, or ``(None, why not)``."""
        if self.problem:
            return None, self.problem
        best = {side: min(times) for side, times in self.samples.items() if times}
        try:
            return figure(self.item.formula, best), ""
        except KeyError as e:
            return None, f"side {e} was never timed"
        except (ValueError, ZeroDivisionError) as e:
            return None, str(e)
