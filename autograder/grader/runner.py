"""Run graded tests in children that may crash, hang, exit or lie, without harm.

A :class:`Session` runs one group of tests (one exercise, or a chapter) in as
many children as it takes: it reads each child's records through a
:class:`~autograder.grader.protocol.Protocol`, stops a test that runs past its
time limit, gives a crash to the test that was running and starts a fresh
child for the rest, and hands a benchmark's ``compare`` to
:class:`~autograder.grader.bench.Bench`. Whatever happens, every test asked
for ends with a :class:`Result`, and nothing the child started outlives it.
"""

from __future__ import annotations

import os
import select
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import config
from . import sandbox
from .bench import Bench
from .children import Child, Launcher, exit_reason
from .manifest import Item, exercises
from .protocol import Forged, Protocol, Result, parse


class Reader:
    """Records from one child's results pipe, one at a time."""

    def __init__(self, child: Child, asked: set[str]):
        self.child, self.asked, self.buffer, self.eof = child, asked, b"", False
        self.volume = 0  # bytes read since the running test started (a lab: its cell, labs.py)

    def next(self, timeout: float) -> dict | None:
        """The next record, or None when none came within ``timeout`` (or the pipe ended)."""
        deadline = time.monotonic() + timeout
        while True:
            if b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                ev = parse(line, self.asked)
                # parsing and judging cost the parent more than writing costs the child, whose
                # CPU clock alone would let it keep the parent busy to its wall-clock limit
                self.volume = 0 if ev["event"] == "start" else self.volume + len(line)
                if self.volume > config.RECORD_VOLUME:
                    raise Forged(f"more than {config.RECORD_VOLUME >> 20} MiB of records for one "
                                 "test or cell")  # fmt: skip
                return ev
            if len(self.buffer) > config.RECORD_LIMIT:
                raise Forged("a record longer than the grader reads")
            left = deadline - time.monotonic()
            if self.eof or not select.select([self.child.out], [], [], max(0.0, left))[0]:
                return None
            chunk = os.read(self.child.out, 1 << 16)
            self.eof = not chunk
            self.buffer += chunk


@dataclass
class Grading:
    """What every session of one run shares: how children start, the trees, the oracle."""

    launcher: Launcher
    mode: str  # learner | isolated | reference
    package: Path  # the parent's copy of the submission's minitorch/
    oracle: dict = field(default_factory=dict)
    recording: dict | None = None
    problems: dict = field(default_factory=dict)  # the submission's broken files
    test_timeout: float = config.TEST_TIMEOUT
    bench_timeout: float = config.BENCH_TIMEOUT
    import_hang: str = ""
    trees: dict = field(default_factory=dict)

    def tree(self, withheld: sandbox.Withheld | None = None) -> Path:
        """A grading tree of the learner's package. Local grading shares one per run; an
        official child gets its own, with its exercise's reference withheld."""
        if not self.launcher.official:
            withheld = sandbox.Withheld()
        key = ("learner", withheld)
        if key not in self.trees:
            self.trees[key] = sandbox.build_tree(self.package, self.mode != "learner",
                                                 withheld, self._dest())  # fmt: skip
        return self.trees[key]

    def baseline_tree(self) -> Path:
        """The course's own package and references: what baselines run on."""
        if "baseline" not in self.trees:
            self.trees["baseline"] = sandbox.build_tree(config.ROOT / "minitorch", True,
                                                        dest=self._dest())  # fmt: skip
        return self.trees["baseline"]

    def _dest(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="tree-", dir=self.launcher.work))

    def drop(self, tree: Path) -> None:
        """An official child's tree once it is done (local trees last the run)."""
        if self.launcher.official:
            for key, t in list(self.trees.items()):
                if t == tree and key != "baseline":
                    sandbox.remove_tree(self.trees.pop(key))

    def close(self) -> None:
        self.launcher.close()
        for tree in self.trees.values():
            sandbox.remove_tree(tree)
        self.trees.clear()


def run_items(items: list[Item], grading: Grading, per_exercise: bool | None = None,
              progress: Callable[[str, Result | None], None] = lambda node, result: None,
              deadline: float | None = None) -> dict[str, Result]:  # fmt: skip
    """Every item gets a Result. ``per_exercise``: one session per exercise (the default
    in isolated mode, as learners are graded) rather than one for all ``items``."""
    deadline = deadline or time.monotonic() + config.CHAPTER_TIMEOUT
    info = exercises()
    results: dict[str, Result] = {}
    broken = {ex: f"{i.path}: {grading.problems[i.path]}" for ex, i in info.items()
              if i.path in grading.problems}  # fmt: skip
    for item in items:
        if item.exercise in broken:
            results[item.nodeid] = Result(
                item, "not run", message=f"not run: {broken[item.exercise]}"
            )
            progress(item.nodeid, results[item.nodeid])
    groups: dict[str | None, list[Item]] = defaultdict(list)
    names = sandbox.Withheld.names_of(info)
    if per_exercise is None:
        per_exercise = grading.mode == "isolated"
    for item in items:
        if item.nodeid not in results:
            groups[item.exercise if per_exercise else None].append(item)
    for ex, group in groups.items():
        session = Session(grading, {i.nodeid: i for i in group}, ex, names, deadline, progress)
        session.run()
        results.update(session.results)
    return gate_benchmarks(results)


def gate_benchmarks(results: dict[str, Result]) -> dict[str, Result]:
    """No benchmark points for an exercise whose graded tests do not all pass."""
    failing = defaultdict(list)
    for r in results.values():
        if r.item.kind == "test" and r.status != "passed":
            failing[r.item.exercise].append(r.item.name)
    for node, r in results.items():
        if r.item.kind == "benchmark" and r.score > 0 and failing[r.item.exercise]:
            names = ", ".join(failing[r.item.exercise][:3])
            results[node] = Result(r.item, "failed", 0.0,
                                   f"no benchmark points until the exercise's tests pass ({names})",
                                   r.where, r.figures, r.duration)  # fmt: skip
    return results


@dataclass
class Session:
    grading: Grading
    by_id: dict[str, Item]
    exercise: str | None
    names: frozenset  # (reference name, id) of every exercise: what a tree withholds from
    deadline: float
    progress: Callable[[str, Result | None], None]
    results: dict[str, Result] = field(default_factory=dict)

    def record(self, node: str, result: Result) -> None:
        self.results[node] = result
        self.progress(node, result)

    def finish(self, nodes, status: str, message: str) -> None:
        for n in nodes:
            if n not in self.results:
                self.record(n, Result(self.by_id[n], status, message=message))

    def run(self) -> None:
        g = self.grading
        while True:
            remaining = [n for n in self.by_id if n not in self.results]
            if not remaining:
                return
            if time.monotonic() > self.deadline:
                return self.finish(remaining, "timeout", "not run: the chapter ran out of time")
            if g.import_hang:  # it would hang again: one time limit is enough
                return self.finish(remaining, "not run", f"not run: {g.import_hang}")
            focus = self.exercise if g.mode == "isolated" else None
            withheld = sandbox.Withheld(exercise=focus, names=self.names) if focus else None
            tree = g.tree(withheld)
            # On a GPU, only what needs one runs there: graded tests run on the simulator,
            # as the references' recorded comparisons were made (and traffic is counted).
            gpu = g.launcher.gpu and self.by_id[remaining[0]].needs == "gpu"
            batch = [
                n for n in remaining if not g.launcher.gpu or (self.by_id[n].needs == "gpu") == gpu
            ]
            child = g.launcher.start({"kind": "tests", "nodeids": batch}, tree, g.mode, gpu=gpu,
                                     commands=any(self.by_id[n].kind == "benchmark" for n in batch))  # fmt: skip
            if isinstance(child, str):
                if "did not finish" in child:
                    g.import_hang = child.splitlines()[0]
                self.finish(batch, "not run", f"not run: {self._broken()}{child}")
                continue
            try:
                started, log = self.run_child(child, batch, tree), child
            finally:
                g.launcher.finish(child)
                g.drop(tree)
            if not started:  # nothing could even start: collection or import failure
                reason = log.tail() or "the test process could not start"
                self.finish(batch, "not run", f"not run: {self._broken()}{reason}")

    def _broken(self) -> str:
        broken = "; ".join(f"{k}: {v}" for k, v in self.grading.problems.items())
        return f"your files have problems ({broken[:600]})\n" if broken else ""

    def run_child(self, child: Child, remaining: list[str], tree: Path) -> bool:
        """Read one child's records until it ends; returns whether any test started."""
        g = self.grading
        proto = Protocol({n: self.by_id[n] for n in remaining}, g.oracle, g.recording)
        reader = Reader(child, set(remaining))
        launched, t_start, cpu_start, killed, kill_status = (
            time.monotonic(),
            0.0,
            0.0,
            "",
            "timeout",
        )
        bench, next_watch, next_limits, others = None, 0.0, 0.0, {}

        def read(c, timeout):  # for Bench: the learner's records are judged, G's only read
            if c is child:
                ev = reader.next(timeout)
                return proto.feed(ev) if ev is not None else None
            return others.setdefault(c.pid, Reader(c, {proto.current})).next(timeout)

        try:
            while True:
                ev = reader.next(0.05)
                if ev is not None:
                    kind = ev["event"]
                    if kind == "result" and bench is not None:  # the parent's figure, first
                        proto.figure = bench.figure()
                    proto.feed(ev)
                    if kind == "ready":
                        launched = time.monotonic()
                    elif kind == "start":
                        t_start, cpu_start = time.monotonic(), child.cpu()
                        self.progress(ev["nodeid"], None)
                    elif kind in ("sampled", "output") and (bench is None or not bench.problem):
                        raise Forged(f"a {kind} record the grader did not ask for")
                    elif kind in ("sides", "fresh"):
                        if bench is None:
                            bench = self.bench(proto.current, child, read, tree)
                        bench.handle(ev)
                        ended = [n for n in proto.results if n not in self.results]
                        if ended:  # the test ended while being timed (it failed, say)
                            g.launcher.finish(bench.baseline if not isinstance(bench.baseline, str)
                                              else None, others=(child,))  # fmt: skip
                            bench = None
                            for n in ended:
                                self.record(n, proto.results[n])
                    elif kind == "result":
                        node = ev["nodeid"]
                        if bench is not None:
                            g.launcher.finish(bench.baseline if not isinstance(bench.baseline, str)
                                              else None, others=(child,))  # fmt: skip
                            bench = None
                        self.record(node, proto.results[node])
                elif reader.eof and child.exit_code() is not None:
                    break
                # Limits are checked between records too: a child that never stops
                # sending them is stopped at its time limit all the same.
                if time.monotonic() < next_limits:
                    continue
                next_limits = time.monotonic() + 0.05
                killed = self._limits(child, proto, launched, t_start, cpu_start)
                if not killed and not g.launcher.official and time.monotonic() > next_watch:
                    next_watch = time.monotonic() + 0.5
                    if len(sandbox.descendants(child.pid)) > config.MAX_PROCESSES:
                        kill_status = "crashed"
                        killed = (f"started more than {config.MAX_PROCESSES} processes at "
                                  "once; the grader stopped them all")  # fmt: skip
                if killed:
                    break
        except Forged as e:
            message = f"the results pipe received {e}; this child's results are void"
            for node in remaining:
                self.results.pop(node, None)
                self.record(node, Result(self.by_id[node], "failed", message=message))
            return True
        finally:
            if (
                bench is not None
                and bench.baseline is not None
                and not isinstance(bench.baseline, str)
            ):
                g.launcher.finish(bench.baseline, others=(child,))
        if killed and not proto.started:  # stopped before its first test: none of them ran
            if not proto.imported:
                g.import_hang = killed
            self.finish(remaining, "timeout", f"not run: {killed}")
            return True
        current = proto.current
        if current is not None and current not in self.results:
            if killed:
                self.record(current, Result(self.by_id[current], kill_status, message=killed))
            else:
                tail = child.tail(4)
                message = f"{exit_reason(child.exit_code())} while running this test"
                self.record(current, Result(self.by_id[current], "crashed",
                                            message=message + (f"\n{tail}" if tail else "")))  # fmt: skip
        return proto.started

    def _limits(self, child, proto, launched, t_start, cpu_start) -> str:
        """Why ``child`` must be stopped now, or "".

        A test's limit is CPU time: on a busy machine its wall time stretches (cold
        Numba compiles, threads waiting for a core) while its CPU time does not. A test
        that sleeps is stopped at WALL_FACTOR times the limit."""
        g, now = self.grading, time.monotonic()
        if now > self.deadline:
            return "the chapter ran out of time"
        if proto.current is not None:
            limit = (
                g.bench_timeout if self.by_id[proto.current].kind == "benchmark" else g.test_timeout
            )
            if child.cpu() - cpu_start > limit:
                return f"used more than {limit:.0f} s of CPU time (an infinite loop?)"
            if now - t_start > config.WALL_FACTOR * limit:
                return (f"still running after {config.WALL_FACTOR * limit:.0f} s "
                        "(waiting for something that never comes?)")  # fmt: skip
        elif not proto.started and now - launched > g.test_timeout:
            what = "the graded tests' modules" if proto.imported else "minitorch"
            return (f"importing {what} did not finish within {g.test_timeout:.0f} s "
                    "(a loop or a wait at import time?)")  # fmt: skip
        return ""

    def bench(self, node: str, child: Child, read, tree: Path) -> Bench:
        """The parent's side of benchmark ``node``: G runs it on the course's own code; fresh
        programs run on the learner's tree (``child``'s) or the course's."""
        g, scratch = self.grading, {}

        def start_baseline():
            return g.launcher.start({"kind": "tests", "nodeids": [node], "role": "baseline"},
                                    g.baseline_tree(), "reference", commands=True, baseline=True)  # fmt: skip

        def start_program(text: str, baseline: bool):
            if baseline not in scratch:
                scratch[baseline] = g.launcher.scratch_dir(baseline)
            mode = "reference" if baseline else g.mode
            focus = self.exercise if mode == "isolated" else None
            job = {"kind": "program", "program": text, "mode": mode, "focus": focus,
                   "role": "baseline" if baseline else "learner"}  # fmt: skip
            return g.launcher.start(job, g.baseline_tree() if baseline else tree, mode, focus,
                                    commands=True, baseline=baseline, scratch=scratch[baseline])  # fmt: skip

        def finish(c):
            g.launcher.finish(
                c, others=(child,) + ((b.baseline,) if isinstance(b.baseline, Child) else ())
            )

        b = Bench(self.by_id[node], child, read, start_baseline, start_program, finish)
        return b
