"""A benchmark's figure, measured by the parent.

A benchmark runs twice at once: in the learner's child (L), which times every
side the decorator does not name in ``baseline``, and in a child of the
course's own code in reference mode (G: the same benchmark function on the
instructor's package and references), which times the baseline sides and
computes what each of L's sides must return. Both call ``harness.compare``,
which reports its sides and then does what the parent says
(``autograder/harness.py``); the parent here:

1. asks G for the result of each of L's sides (the expected values);
2. warms every side up, then chooses how many calls make a sample: one when a
   single call lasts :data:`config.ONE_CALL`, else enough for
   :data:`config.MIN_SAMPLE` of CPU time;
3. takes one sample of each side per round, in alternating order, reading the
   sampling child's CPU clock before and after (from outside: a rebound clock
   in the child changes nothing). In official grading a child cannot start
   processes, so its clock is all its work. While G samples, L is stopped: no
   thread of the learner's can slow the baseline. A figure short of full credit
   after the rounds asked for gets up to as many again (load only adds time);
4. after each of L's samples, compares the result of its last call with G's,
   every value, read from the child's memory (for a benchmark that varies its
   inputs, ``vary``, G computes it for the inputs of that sample, which the
   parent seeded just before it); making it plain is timed too, and what it
   takes beyond G's is added to the sample (a result that computes only when
   read pays for it there);
5. computes the decorator's ``formula`` from each side's fastest sample.

A figure without a ``formula`` (memory, traffic) is the one the benchmark
reports; the report says which figures are the parent's.
"""

from __future__ import annotations

import ast
import operator
import secrets
import signal
import time
from dataclasses import dataclass, field

from .. import config
from .judge import close, read_array
from .manifest import Item

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv}  # fmt: skip


def figure(formula: str, best: dict[str, float], partial: bool = False) -> float:
    """``formula`` (``"numpy / fused"``, ``min(a / b, c / d)``) over the sides' best times.
    ``partial``: a ``min``/``max`` argument whose sides are not timed yet is left out (a
    benchmark's first compare can be judged before its second)."""

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
            values = []
            for a in node.args:
                try:
                    values.append(ev(a))
                except KeyError:
                    if not partial:
                        raise
            if not values:
                raise KeyError(node.func.id)
            return (min if node.func.id == "min" else max)(values)
        raise ValueError(f"not allowed in a formula: {ast.dump(node)[:60]}")

    return float(ev(ast.parse(formula, mode="eval")))


class Failed(Exception):
    """The benchmark cannot be timed (a side failed, a wrong result, a child that stopped)."""


@dataclass
class Bench:
    """One benchmark's compares. ``read(child, seconds)`` gives a child's next record;
    ``start_baseline()`` starts G, ``start_program(text, baseline)`` a fresh program's
    process (the learner's or the course's), ``finish(child)`` stops one."""

    item: Item
    learner: object  # children.Child
    read: object
    start_baseline: object
    start_program: object
    finish: object
    baseline: object = None
    samples: dict[str, list[float]] = field(default_factory=dict)
    constants: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
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
            if ev["event"] not in ("ready", "start", "check"):  # anything else is out of turn
                raise Failed(f"a {ev['event']} record out of turn (expected {'/'.join(kinds)})")

    def handle(self, ev: dict) -> None:
        """L reached a ``compare`` or ``fresh`` (record ``ev``): time it. On any failure
        :attr:`problem` says why and both children are told to go on untimed."""
        try:
            if self.problem:
                raise Failed(self.problem)
            if not self.item.formula:
                raise Failed("this benchmark is not timed by the grader")
            if self.baseline is None:
                self.baseline = self.start_baseline()
            if isinstance(self.baseline, str):
                raise Failed(f"the course's own code could not start: {self.baseline[:300]}")
            theirs = self._next(self.baseline, (ev["event"],))
            got = self._fresh(ev, theirs) if ev["event"] == "fresh" else self._compare(ev, theirs)
            for side, times in got.items():
                self.samples.setdefault(side, []).extend(times)
            for child in (self.learner, self.baseline):
                child.send({"do": "done", "samples": got})
        except Failed as e:
            self.problem = self.problem or str(e)
            for child in (self.learner, self.baseline):
                if child is not None and not isinstance(child, str):
                    child.signal(signal.SIGCONT)
                    child.send({"do": "done", "samples": {}})

    def _compare(self, ev: dict, theirs: dict) -> dict[str, list[float]]:
        sides = [s for s in theirs.get("sides", []) if isinstance(s, str)]
        if ev.get("sides") != sides:
            raise Failed(f"the benchmark compares {ev.get('sides')}, the course's own code {sides}")
        # the course's own settings, never the learner's
        tol = [float(t) for t in theirs.get("tol", [1e-5, 1e-6])]
        rounds = 1 if theirs.get("once") else min(max(int(theirs.get("rounds", 7)), 3), 25)
        warmup = 0 if theirs.get("once") else min(max(int(theirs.get("warmup", 2)), 1), 5)
        min_time = min(max(float(theirs.get("min_time", 0)), config.MIN_SAMPLE), 0.5)
        checked = set(theirs.get("checked", sides))
        self.constants.update({str(k): float(v) for k, v in theirs.get("constants", {}).items()})
        owner = {s: self.baseline if s in self.item.baseline else self.learner for s in sides}
        self.calls = dict.fromkeys(sides, 0)  # calls L made of each side: G replays them
        stateful, varied, expected = bool(theirs.get("stateful")), bool(theirs.get("vary")), {}
        for side in sides:  # what L's sides must return, and how long reading it takes
            if owner[side] is self.learner and side in checked and not (stateful or varied):
                self._do(self.baseline, "expect", side)
                expected[side] = self._output(self.baseline, side)
        loops = {side: 1 if theirs.get("once") else self._calibrate(owner[side], side, warmup, min_time)
                 for side in sides}  # fmt: skip
        got = {side: [] for side in sides}
        started, r, most = time.monotonic(), 0, rounds if theirs.get("once") else 2 * rounds
        # A figure short of full credit gets up to as many rounds again: load only adds time,
        # so more samples can only bring each side's fastest closer to what the code does.
        while r < rounds or (r < most and self._short(got) and
                             time.monotonic() + 2 * (time.monotonic() - started) / r < self.deadline):  # fmt: skip
            r += 1
            for side in sides if r % 2 == 1 else sides[::-1]:
                seed = secrets.randbits(62) if varied else None  # drawn now: nothing precomputes
                seconds = self._sample(owner[side], side, loops[side], seed)
                if owner[side] is self.learner and side in checked:
                    if (
                        stateful or varied
                    ):  # the course's code makes the same calls, then both are read
                        n = self.calls[side] if stateful else 1
                        self._do(self.baseline, "expect", side, n, seed=seed)
                        self.calls[side] = 0
                        expected[side] = self._output(self.baseline, side)
                    seconds += self._check(self.learner, side, expected[side], tol)
                got[side].append(seconds / loops[side])
        return got

    def _short(self, got: dict[str, list[float]]) -> bool:
        """Whether the figure so far (this compare's samples with the earlier ones) is short of
        full credit; False when it cannot be computed yet."""
        if not self.item.bands:
            return False
        best = {s: min(t) for s, t in self.samples.items() if t}
        best.update({s: min(t + self.samples.get(s, [])) for s, t in got.items() if t})
        try:
            value = figure(self.item.formula, {**self.constants, **best}, partial=True)
        except (KeyError, ValueError, ZeroDivisionError):
            return False
        full = self.item.bands[0][0]
        return value < full if self.item.higher_is_better else value > full

    def _fresh(self, ev: dict, theirs: dict) -> dict[str, list[float]]:
        """Each program in a fresh process of its own (the course's text, not the learner's):
        first on the course's code for what it must return, then on the learner's, checked.
        A program named in ``baseline`` is timed on the course's code, the others on the
        learner's (the learner's still runs: a later program may need what it cached)."""
        programs = theirs.get("programs")
        if not isinstance(programs, dict) or ev.get("programs", {}).keys() != programs.keys():
            raise Failed("the benchmark's programs differ from the course's")
        got = {}
        for name, text in programs.items():
            for baseline in (True, False):
                child = self.start_program(f"NAME = {name!r}\n{text}", baseline)
                if isinstance(child, str):
                    raise Failed(f"a fresh process could not start: {child[:300]}")
                try:
                    sides = self._next(child, ("sides",))
                    if sides.get("sides") != [name]:
                        raise Failed(f"the program {name} timed {sides.get('sides')}")
                    before = child.cpu()
                    self._do(child, "sample", name)
                    seconds = max(child.cpu() - before, 1e-9)
                    if baseline:
                        expected = self._output(child, name)
                    else:
                        tol = [float(t) for t in sides.get("tol", [1e-5, 1e-6])]
                        seconds += self._check(child, name, expected, tol)
                    if baseline == (name in self.item.baseline):
                        got[name] = [seconds]
                    child.send({"do": "done", "samples": {}})
                finally:
                    self.finish(child)
        return got

    def _do(self, child, do: str, side: str, n: int = 1, kind: str = "sampled", seed=None) -> dict:
        """One command; the child's answer."""
        command = {"do": do, "side": side, "n": n} | ({} if seed is None else {"seed": seed})
        if not child.send(command):
            raise Failed("the benchmark's command pipe is closed")
        answer = self._next(child, (kind,))
        if answer.get("error") or answer.get("side") != side:
            raise Failed(f"{do} {side} failed: {str(answer.get('error'))[:200]}")
        return answer

    def _sample(self, child, side: str, n: int, seed=None) -> float:
        """CPU seconds ``child`` spends on ``n`` calls of ``side`` (after changing the inputs
        with ``seed``), read from outside."""
        other = self.learner if child is self.baseline else None
        if other is not None:  # nothing of the learner's runs while a baseline is timed
            other.signal(signal.SIGSTOP)
        try:
            self._do(child, "collect", side)  # a garbage collection first, outside the timing
            before = child.cpu()
            self._do(child, "sample", side, n, seed=seed)
            if child is self.learner:
                self.calls[side] = self.calls.get(side, 0) + n
            return max(child.cpu() - before, 1e-9)
        finally:
            if other is not None:
                other.signal(signal.SIGCONT)

    def _output(self, child, side: str, like=None) -> dict:
        """The last result of ``side``, made plain and read whole from the child's memory (only
        if shaped as ``like``, the course's result, when given: ``judge.read_array``);
        with the CPU seconds that took (read after the copy: work a thread of the child does
        to finish the result before it is read counts)."""
        before = child.cpu()
        got = self._do(child, "output", side, kind="output")
        if got.get("value") is None:
            raise Failed(f"{side} returned {str(got.get('error'))[:200] or 'nothing'}")
        try:
            array = read_array(child.pid, got["value"], like)
        except (ValueError, OSError) as e:
            raise Failed(f"the result of {side} could not be read: {str(e)[:200]}") from None
        return {"array": array, "seconds": child.cpu() - before}

    def _calibrate(self, child, side: str, warmup: int, min_time: float) -> int:
        """Calls per sample: one for a side whose call lasts :data:`config.ONE_CALL` (every
        result it returns is read), else enough for ``min_time``."""
        for _ in range(warmup):  # compilation, caches, thread pools
            self._sample(child, side, 1)
        # judged on a warm call: a second call that still compiles (a retrace) once made a
        # 1 ms side one call per sample, and the inputs' change before each sample then
        # weighed as much as the call
        once = self._sample(child, side, 1)
        if once >= config.ONE_CALL:
            return 1
        n = 1
        while n < 1 << 20 and self._sample(child, side, n) < min_time:
            n *= 2
        return n

    def _check(self, child, side: str, expected: dict, tol) -> float:
        """The last result of a sample of ``side`` against the course's own; returns how much
        longer reading it took than reading the course's (charged to the sample: a result
        that computes when read pays for it there)."""
        got = self._output(child, side, expected["array"])
        ok, why = close(got["array"], expected["array"], float(tol[0]), float(tol[1]))
        if not ok:
            raise Failed(f"{side} returned a wrong result while timed: {why}")
        self._do(child, "verify", side)
        return max(0.0, got["seconds"] - expected["seconds"])

    def figure(self) -> tuple[float | None, str]:
        """The graded figure, or ``(None, why not)``."""
        if self.problem:
            return None, self.problem
        best = {side: min(times) for side, times in self.samples.items() if times}
        try:
            return figure(self.item.formula, {**self.constants, **best}), ""
        except KeyError as e:
            return None, f"side {e} was never timed"
        except (ValueError, ZeroDivisionError) as e:
            return None, str(e)
