"""Grade the generated mutants of chapters: ``python -m tests.mutation C [C ...]``.

One parent per run imports minitorch and the graded tests once; each mutant
is graded in a child forked from it (a mutant of a Numba kernel may write
outside its arrays and crash, or loop for ever in compiled code where no
signal reaches it), with the machinery of ``tests/mutants/``: the mutated
module is written to ``build/mutation/src/``, its functions of the exercises
the change reaches are installed as the learner's code, and those exercises'
graded tests run, stopping at the first failure. A crash or a time-out loses
points in real grading too, so it counts as killed. Before the mutants of a
file, its unchanged copy is graded the same way and must keep full marks.

Prints, per exercise, the mutants, killed, recorded equivalent and surviving,
each survivor with its change, and the chapter's score: killed / (all -
recorded equivalents). ``--sample N`` grades a fixed sample of N per chapter,
``--per-exercise N`` a fixed N of each exercise's (what ``make test`` runs).

A mutant is judged as the grader judges it, not only by pytest: the child
attaches the harness's results channel (``autograder/wire.py``) to a file, and
its records (each test's ``start``, ``check`` records and ``result``) are read
by the grader's own :class:`~autograder.grader.protocol.Protocol` with the
references' recorded comparisons (``autograder/oracle.json.gz``). A test whose
``check(..., value=...)`` or ``assert_close`` disagrees with the reference
run's value at that place fails, as in real grading, even when its own assert
holds (an ``OpError`` naming another op, in a test that sends ``e.op``). The
unchanged file's run checks the recorded entries these tests use: a stale
oracle that no longer fits them stops the run (``make oracle``).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import importlib
import importlib.util
import json
import os
import select
import signal
import sys
import tempfile
import time
from pathlib import Path

from tests.mutants import __main__ as hand  # isort: skip  # first: sets the mode and Numba's simulator

import pytest  # noqa: E402

from autograder import wire  # noqa: E402
from autograder.grader import manifest, oracle  # noqa: E402
from autograder.grader.manifest import Item  # noqa: E402
from autograder.grader.protocol import Forged, Protocol, parse  # noqa: E402
from minitorch import exercises  # noqa: E402

from . import ROOT, Generated, equivalents, generate, open_exercises  # noqa: E402

SRC = ROOT / "build" / "mutation" / "src"
TIMEOUT = 60  # seconds per mutant (--timeout); a mutant that loops for ever is killed by it


def _chapter_tests(chapter: int) -> dict[str, list[str]]:
    tests: dict[str, list[str]] = {}
    for item in manifest.graded_items(chapter):
        if item.kind == "test":
            tests.setdefault(item.exercise, []).append(item.nodeid)
    return tests


class Grader:
    """What the grader's parent holds while a child runs: each graded test's item and the
    references' recorded comparisons. :meth:`judge` reads a child's records as it does."""

    def __init__(self, chapter: int):
        self.items: dict[str, Item] = {
            i.nodeid: i for i in manifest.graded_items(chapter) if i.kind == "test"
        }
        self.expected, self.stale = oracle.load()
        if self.expected is None:  # stale: its entries for these tests may still hold, and
            try:  # the unchanged file's run (which must keep full marks) says whether they do
                self.expected = json.loads(gzip.decompress(oracle.PATH.read_bytes()))["tests"]
            except (OSError, ValueError, EOFError, KeyError):
                raise SystemExit(f"no recorded comparisons to judge with: {self.stale}") from None

    def judge(self, records: bytes, nodeids: list[str]) -> dict:
        """The grader's verdict on the tests' records: ``node -> Result``."""
        proto = Protocol({n: self.items[n] for n in nodeids}, self.expected)
        asked = set(nodeids)
        for line in records.splitlines():
            proto.feed(parse(line, asked))
        return proto.results


def _load(g: Generated):
    """The mutated module, from a file (Numba and tracebacks read the source)."""
    digest = hashlib.sha1(g.source.encode()).hexdigest()[:12]
    path = SRC / g.file.removesuffix(".py") / f"m_{digest}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != g.source:
        path.write_text(g.source)  # only when new: Numba's cache is keyed on the file's time
    name = f"solutions.reference._mutant_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _grade(
    g: Generated, nodeids: list[str], names: dict[str, str], grader: Grader, limit: int
) -> dict:
    """In the child: install the mutant's functions, run the tests, say what happened."""
    module = _load(g)
    for ex in g.exercises:
        exercises.REGISTRY[ex].stub = getattr(module, names[ex])
    exercises._cache.clear()
    fd, records = tempfile.mkstemp(prefix="minitorch-mutation-", suffix=".jsonl")
    wire.attach(fd)  # the harness's records, as a grading child sends them to its parent
    old = signal.signal(signal.SIGALRM, hand._alarm)
    signal.alarm(limit)
    try:
        collect = hand._run(nodeids)
    except hand._Timeout as e:
        return {"status": "killed", "detail": f"timeout: {e}"}
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        with open(records, "rb") as f:
            sent = f.read()
        os.unlink(records)
    if collect.broken:
        return {"status": "error", "detail": "; ".join(collect.broken)}
    if collect.failed:
        node, why = next(iter(collect.failed.items()))
        detail = f"{node.split('::')[-1]}: {why}"
        if "NotImplementedError: Exercise " in why:  # what a stub raises
            return {"status": "error", "detail": f"a stub ran, not the mutant: {detail}"}
        return {"status": "killed", "detail": detail}
    missing = sorted(set(nodeids) - collect.passed)
    if missing:
        return {"status": "error", "detail": f"not run: {', '.join(missing)}"}
    try:  # every test passed in pytest: now as the grader's parent judges them
        results = grader.judge(sent, nodeids)
    except Forged as e:
        return {"status": "error", "detail": f"the records do not read as a grading child's: {e}"}
    for node in nodeids:
        r = results.get(node)
        if r is None:
            return {"status": "error", "detail": f"no result record for {node}"}
        if r.status != "passed":
            return {"status": "killed",
                    "detail": f"{node.split('::')[-1]}: the grader: {r.message}"}  # fmt: skip
    return {"status": "survived", "detail": "every graded test passed"}


def _in_child(
    g: Generated,
    nodeids: list[str],
    names: dict[str, str],
    grader: Grader,
    limit: int | None = None,
) -> dict:
    """Fork, grade ``g`` in the child, and read its verdict; a crash or hang is a kill."""
    limit = limit or TIMEOUT
    read, write = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            row = _grade(g, nodeids, names, grader, limit)
        except BaseException as e:  # noqa: BLE001 - report anything, never run the parent's code
            row = {"status": "error", "detail": f"{type(e).__name__}: {e}"[:300]}
        with contextlib.suppress(OSError):
            os.write(write, json.dumps(row).encode())
        os._exit(0)
    os.close(write)
    data, deadline = b"", time.monotonic() + limit + 30
    with os.fdopen(read, "rb") as pipe:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {"status": "killed", "detail": f"timeout: over {limit} s (compiled code)",
                        "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
            chunk = os.read(pipe.fileno(), 1 << 16)
            if not chunk:
                break
            data += chunk
    _, status = os.waitpid(pid, 0)
    seconds = round(time.perf_counter() - t0, 1)
    if not data:
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else "no verdict"
        return {"status": "killed", "detail": f"crashed ({how})", "seconds": seconds}
    return {**json.loads(data), "seconds": seconds}


def _names(chapter: int) -> dict[str, str]:
    return {e: i.name for e, i in manifest.exercises().items() if e.split(".")[0] == str(chapter)}


def _prepare(chapter: int, tests: dict[str, list[str]]) -> None:
    """Import the chapter's stubs, references and test modules once, in the parent."""
    from minitorch.tracing import graph

    # a mutant stands where minitorch's code stands: a node's source location skips it
    if str(SRC) + os.sep not in graph._SKIP:
        graph._SKIP += (str(SRC) + os.sep,)
    for info in manifest.exercises().values():
        if info.id.split(".")[0] == str(chapter):
            importlib.import_module(info.path.removesuffix(".py").replace("/", "."))
    importlib.import_module(f"solutions.reference.ch{chapter}")
    ids = [n for nodes in tests.values() for n in nodes]
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        pytest.main(["--collect-only", "-qq", "-p", "no:cacheprovider", "-o", "addopts=",
                     "--rootdir", str(ROOT), *ids])  # fmt: skip


def select_mutants(chapter: int, only: str | None, sample: int | None,
                   per_exercise: int | None = None, operator: str | None = None) -> list[Generated]:  # fmt: skip
    """The chapter's mutants (of exercise ``only``, by ``operator`` "mutmut" or "course");
    ``sample``: a fixed N of them; ``per_exercise``: a fixed N of each exercise's (every
    exercise is reached). Samples draw from mutmut's operators only, so CI's fixed sample
    stays the one it was when the course's operators came."""
    found = [g for g in generate(chapter, _names(chapter))
             if (only is None or only in g.exercises) and operator in (None, g.operator)]  # fmt: skip
    if sample is None and per_exercise is None:
        return found
    known = equivalents()
    found = sorted((g for g in found if g.key not in known and g.operator == "mutmut"),
                   key=lambda g: g.sample_rank)  # fmt: skip
    if per_exercise is not None:
        taken: dict[str, int] = {}
        picked = []
        for g in found:
            if any(taken.get(e, 0) < per_exercise for e in g.exercises):
                picked.append(g)
                for e in g.exercises:
                    taken[e] = taken.get(e, 0) + 1
        found = picked
    else:
        found = found[:sample]
    return sorted(found, key=lambda g: (g.file, g.line))


def run_chapter(chapter: int, only: str | None = None, sample: int | None = None,
                verbose: bool = False, per_exercise: int | None = None,
                operator: str | None = None) -> dict:  # fmt: skip
    names, tests, grader = _names(chapter), _chapter_tests(chapter), Grader(chapter)
    _prepare(chapter, tests)
    mutants = select_mutants(chapter, only, sample, per_exercise, operator)
    rows, controls = [], {}
    for g in mutants:
        nodeids = [n for ex in g.exercises for n in tests.get(ex, [])]
        if g.file not in controls:  # the unchanged file first: it must keep full marks
            text = (ROOT / "solutions" / "reference" / g.file).read_text()
            fx = sorted({e for m in mutants if m.file == g.file for e in m.exercises})
            same = Generated("control", g.file, "", tuple(fx), 0, "", "", text)
            # a generous limit: this child compiles every kernel of the exercises it grades
            # (a whole chapter with --per-exercise), where a mutant's compiles one exercise's
            controls[g.file] = _in_child(same, [n for e in fx for n in tests.get(e, [])], names,
                                         grader, 4 * TIMEOUT)  # fmt: skip
            if verbose:
                print(f"unchanged {g.file}: {controls[g.file].get('seconds', 0):.1f}s", flush=True)
            if controls[g.file]["status"] != "survived":
                stale = f" (stale oracle: {grader.stale}; make oracle)" if grader.stale else ""
                raise SystemExit(f"the unchanged {g.file} lost points{stale}: {controls[g.file]}")
        row = {"key": g.key, "exercises": list(g.exercises), "file": g.file, "line": g.line,
               "before": g.before, "after": g.after}  # fmt: skip
        row.update(_in_child(g, nodeids, names, grader) if nodeids else
                   {"status": "error", "detail": "no graded tests"})  # fmt: skip
        rows.append(row)
        if verbose:
            print(f"{'+'.join(g.exercises):<8} {row['status']:<8} {row.get('seconds', 0):5.1f}s "
                  f"{g.file}:{g.line} {g.before} => {g.after}  [{row['detail'][:120]}]",
                  flush=True)  # fmt: skip
    return {"chapter": chapter, "sample": sample, "per_exercise": per_exercise, "rows": rows}


def summary(result: dict) -> tuple[str, dict]:
    known, opened = equivalents(), open_exercises()
    groups: dict[str, list[dict]] = {}
    for r in result["rows"]:
        groups.setdefault("+".join(r["exercises"]), []).append(r)
    lines = [f"Chapter {result['chapter']}: generated mutants (mutmut's operators and the course's)"
             + (f", a fixed sample of {result['sample']}" if result["sample"] else "")
             + (f", {result['per_exercise']} per exercise" if result.get("per_exercise") else ""),
             f"{'exercise':<12} {'mutants':>7} {'killed':>6} {'equiv':>5} {'survived':>8}"]  # fmt: skip
    total = {"mutants": 0, "killed": 0, "equivalent": 0, "survived": 0, "error": 0}
    for name in sorted(groups, key=lambda x: manifest.exercise_sort_key(x.split("+")[0])):
        rs = groups[name]
        killed = [r for r in rs if r["status"] == "killed"]
        equiv = [r for r in rs if r["status"] == "survived" and (
            r["key"] in known or all(e in opened for e in r["exercises"]))]  # fmt: skip
        bad = [r for r in rs if r["status"] != "killed" and r not in equiv]
        stale = [r for r in killed if r["key"] in known]
        total["mutants"] += len(rs)
        total["killed"] += len(killed)
        total["equivalent"] += len(equiv)
        total["survived"] += sum(r["status"] == "survived" for r in bad)
        total["error"] += sum(r["status"] == "error" for r in bad)
        lines.append(f"{name:<12} {len(rs):>7} {len(killed):>6} {len(equiv):>5} {len(bad):>8}")
        lines += [f"    {r['status']}: {r['file']}:{r['line']} {r['before']}  =>  {r['after']}"
                  + (f"  ({r['detail'][:200]})" if r["status"] == "error" else "") for r in bad]  # fmt: skip
        lines += [f"    killed, but listed as equivalent: {r['key']}" for r in stale]
    judged = total["mutants"] - total["equivalent"]
    total["score"] = round(100 * total["killed"] / judged, 1) if judged else 100.0
    lines.append(f"score {total['score']}%: {total['killed']} killed of {judged} "
                 f"({total['mutants']} mutants, {total['equivalent']} recorded equivalent)")  # fmt: skip
    return "\n".join(lines), total


def _set_timeout(seconds: int) -> None:
    global TIMEOUT
    TIMEOUT = seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument("chapters", type=int, nargs="+")
    parser.add_argument("--exercise", help="only the mutants that reach this exercise (C.N)")
    parser.add_argument("--sample", type=int, help="a fixed sample of N mutants per chapter")
    parser.add_argument("--per-exercise", type=int,
                        help="a fixed sample of N mutants of each exercise (CI's check)")  # fmt: skip
    parser.add_argument("--operator", choices=["mutmut", "course"],
                        help="only mutmut's mutants, or only the course's (operators.py)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write every verdict here")
    parser.add_argument("--timeout", type=int, default=TIMEOUT, help="seconds per mutant")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per mutant as it runs")
    args = parser.parse_args(argv)
    _set_timeout(args.timeout)
    results, ok = [], True
    for chapter in args.chapters:
        result = run_chapter(chapter, args.exercise, args.sample, args.verbose, args.per_exercise,
                             args.operator)  # fmt: skip
        text, total = summary(result)
        result["total"] = total
        results.append(result)
        print(text, flush=True)
        ok = ok and total["survived"] == total["error"] == 0
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
