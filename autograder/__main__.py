"""``python -m autograder``: grade the learner's work (or the reference) and report.

    python -m autograder                  # every chapter, isolated grading (local: feedback)
    python -m autograder --chapter 1      # one chapter
    python -m autograder --exercise 1.3   # one exercise's tests (no notebook)
    python -m autograder --integrated     # your code everywhere, no reference fallback
    python -m autograder --official --submission DIR   # official grading (root; see CONTRIBUTING)
    python -m autograder --solutions      # the reference solutions: must earn full marks
    python -m autograder --expect zero    # the untouched starter code: must earn nothing
    python -m autograder --record-oracle  # record the references' comparisons (make oracle)

Exit code 0 whatever the score (unless --solutions or --expect is given and
not met); 2 when the grader itself could not run or refused to.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import config
from .grader import labs, manifest, oracle, sandbox, submission
from .grader.children import Launcher
from .grader.protocol import Result
from .grader.report import print_report, totals, write_results_json
from .grader.runner import Grading, run_items
from .tools import integrity


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.split("\n")[0])
    p.add_argument("--chapter", "-c", type=int, action="append", help="grade only this chapter")
    p.add_argument("--exercise", "-e", help="grade only this exercise, e.g. 1.3")
    p.add_argument("--solutions", action="store_true", help="grade the reference solutions")
    p.add_argument("--integrated", action="store_true",
                   help="use your code for every chapter (default: isolated, reference elsewhere)")  # fmt: skip
    p.add_argument("--official", action="store_true",
                   help="official grading: learner code as an unprivileged user in a world of its own")  # fmt: skip
    p.add_argument(
        "--expect", choices=["full", "zero"], help="exit 1 unless the score is full / zero"
    )
    p.add_argument("--no-notebooks", action="store_true", help="skip the lab notebooks")
    p.add_argument("--record-oracle", action="store_true",
                   help="grade the references and record their comparisons in autograder/oracle")  # fmt: skip
    p.add_argument("--json", default="build/results.json", help="where to write results.json")
    p.add_argument("--timeout", type=float, default=config.TEST_TIMEOUT,
                   help="CPU seconds per graded test (the wall clock allows 3x)")  # fmt: skip
    p.add_argument("--submission", type=Path, default=config.ROOT,
                   help="the folder holding the minitorch/ (and exercises/) to grade")  # fmt: skip
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.record_oracle:
        args.solutions, args.no_notebooks, args.chapter, args.exercise = True, False, None, None
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    out = Path(args.json)
    out.unlink(missing_ok=True)  # a run that fails leaves no stale scores behind
    sandbox.become_subreaper()
    results: list = []
    work = Path(tempfile.mkdtemp(prefix="autograder-"))
    os.chmod(work, 0o700)
    grading = None
    try:
        grading = prepare(args, work)
        return grade(args, console, out, results, grading)
    except sandbox.Refused as e:
        return _failed(console, out, results, f"official grading refused: {e}", grading, work)
    except Exception as e:  # the grader's own failure (a full disk, say): still a report
        return _failed(console, out, results, f"the grader could not finish: {type(e).__name__}: {e}",
                       grading, work)  # fmt: skip
    finally:
        _close(grading, work)


def _close(grading, work: Path) -> None:
    """Nothing of the run is left: every child and what it started, every tree."""
    if grading is not None:
        grading.close()
    sandbox.kill_descendants()
    if os.environ.get("AUTOGRADER_KEEP"):  # for instructors: the children's logs and trees
        print(f"kept {work}", file=sys.stderr)
    else:
        sandbox.remove_tree(work)


def _failed(console, out, results, why: str, grading, work) -> int:
    _close(grading, work)  # every child is dead before results.json is written
    console.print(f"[red bold]{escape(why)}[/]")
    console.print(f"{len(results)} results were complete; the rest earn nothing this run.")
    try:
        write_results_json(results, out, 0.0, {"error": why})
        console.print(f"[dim]results.json written to {out}[/]")
    except OSError as e2:
        console.print(f"[red]results.json could not be written either: {escape(str(e2))}[/]")
    return 2


def prepare(args, work: Path) -> Grading:
    mode = "reference" if args.solutions else ("learner" if args.integrated else "isolated")
    if args.official and mode != "isolated":
        raise sandbox.Refused("official grading is isolated grading of a submission")
    launcher = Launcher(official=args.official, work=work, test_timeout=args.timeout)
    copy = work / "submission"
    problems = submission.copy(args.submission, copy)
    return Grading(launcher, mode, copy / "minitorch", problems=problems, test_timeout=args.timeout)


def grade(args, console: Console, out: Path, results: list, grading: Grading) -> int:
    start = time.monotonic()
    mode = grading.mode
    expect = "full" if args.solutions and not args.expect else args.expect
    tampered = integrity.problems()
    if tampered and not args.solutions:
        console.print("[red bold]The grader's own files differ from autograder/hashes.json:[/]")
        for line in tampered[:20]:
            console.print(f"  {escape(line)}", highlight=False)
        console.print("Restore them (git checkout autograder solutions minitorch/exercises.py).")
        grading.close()
        write_results_json([], out, 0.0, {"mode": mode, "refused": tampered[:20]})
        return 2
    if tampered:
        console.print("[yellow]grader files differ from hashes.json (run `make hashes`)[/]")

    chapters = args.chapter or manifest.chapters()
    if args.exercise:
        chapters = [int(args.exercise.split(".")[0])]
    unknown = [c for c in chapters if c not in manifest.chapters()]
    if unknown:
        console.print(
            f"[red]No graded tests for chapter(s) {unknown}; have {manifest.chapters()}[/]"
        )
        return 2
    plan = []  # (chapter, tests, lab items)
    for ch in chapters:
        tests = manifest.graded_items(ch)
        if args.exercise:
            tests = [t for t in tests if t.exercise == args.exercise]
            if not tests:
                console.print(f"[red]No graded test covers exercise {args.exercise}[/]")
                return 2
        if args.record_oracle:  # benchmarks are not recorded
            tests = [t for t in tests if t.kind == "test"]
        labs_ = [] if (args.no_notebooks or args.exercise) else manifest.notebook_items(ch)
        plan.append((ch, tests, labs_))
    total = sum(len(t) + len(n) for _, t, n in plan)

    expected, why = ({}, "") if args.record_oracle else oracle.load()
    if expected is None:
        console.print(f"[yellow]Grading without the references' recorded comparisons: {why}[/]")
    grading.oracle = expected or {}
    grading.recording = {} if args.record_oracle else None
    have = {
        int(p.name[2:].split("_")[0].split(".")[0])
        for p in (config.ROOT / "solutions" / "reference").glob("ch*.py")
    }
    missing = [ch for ch in chapters if ch not in have]
    if mode == "isolated" and missing:
        console.print(f"[yellow]The references of chapter(s) {missing} are not in this repository: "
                      "in isolated grading their exercises run your own code.[/]")  # fmt: skip
    shared = {}  # official grading withholds a shared helper with both exercises' references
    if args.official:
        names = sandbox.Withheld.names_of()
        for ex in sorted({t.exercise for _, tests, _ in plan for t in tests},
                         key=manifest.exercise_sort_key):  # fmt: skip
            others = sorted(sandbox.shared_with(ex, names), key=manifest.exercise_sort_key)
            if others:
                shared[ex] = others
                console.print(f"[yellow]While {ex} is graded, {', '.join(others)} run(s) your own "
                              f"code: its reference shares code with {ex}'s answer, which is "
                              "withheld.[/]")  # fmt: skip
    broken = grading.problems
    if broken:
        console.print("[red bold]Problems with your files[/] (what they define scores 0; "
                      "everything else is graded):")  # fmt: skip
        for rel, problem in broken.items():
            console.print(f"  {escape(rel)}: {escape(problem)}", highlight=False)
    package_ok = (grading.package / "__init__.py").is_file()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.fields[current]}"), console=console,
                  transient=True) as progress:  # fmt: skip
        task = progress.add_task("grading", total=total, current="")

        def on_event(nodeid, result):
            if result is None:
                progress.update(task, current=nodeid.split("::")[-1])
            else:
                progress.advance(task)

        for ch, tests, labs_ in plan:
            progress.update(task, description=f"chapter {ch}")
            if tests and not package_ok:
                why_not = broken.get("minitorch/", "no minitorch/ in the submission")
                results += [
                    Result(t, "not run", message=f"not run: minitorch/ {why_not}") for t in tests
                ]
            elif tests:  # the oracle is recorded one child per exercise, as learners are graded
                results += run_items(tests, grading, progress=on_event,
                                     per_exercise=True if args.record_oracle else None).values()  # fmt: skip
            if labs_:
                progress.update(task, current=f"lab notebook ch{ch}")
                source = manifest.notebook_path(ch)
                notebook = grading.package.parent / "exercises" / source.name
                if args.solutions:
                    notebook = source
                results += labs.grade_lab(labs_, source, notebook, grading, oracle=grading.oracle,
                                          record=grading.recording).values()  # fmt: skip
                progress.advance(task, len(labs_))

    if args.record_oracle:
        code = record_oracle(console, plan, results, grading)
        if code:
            return code
    grading.close()  # every child is dead before the results are written
    results.sort(key=lambda r: (r.item.chapter, manifest.exercise_sort_key(r.item.exercise)))
    who = "reference solutions" if args.solutions else (
        "your code" + (" (integrated)" if args.integrated else ""))  # fmt: skip
    seconds = time.monotonic() - start
    write_results_json(results, out, seconds, {"mode": mode, "official": args.official,
                                               "chapters": chapters, "problems": broken,
                                               "references_missing": missing,
                                               "run_as_yours": shared})  # fmt: skip
    print_report(results, manifest.exercises(), console, f"Total for {who}",
                 official=args.official)  # fmt: skip
    console.print(f"[dim]results.json written to {out} ({seconds:.0f} s)[/]")
    got, possible = totals(results)
    if expect == "full" and got < possible - 1e-9:
        console.print(f"[red bold]Expected full marks, got {got:g} / {possible:g}[/]")
        for r in results:  # last, so that a log's tail names them
            if r.counted and r.score < r.item.points - 1e-9:
                figures = ", ".join(f"{k}={v:.3g}" if isinstance(v, (int, float)) else f"{k}={v}"
                                    for k, v in list(r.figures.items())[:6])  # fmt: skip
                console.print(f"  lost {r.item.points - r.score:g}: {r.item.exercise} {r.item.name} "
                              f"({r.status}) {figures} {r.message[:200]}", markup=False, highlight=False)  # fmt: skip
        return 1
    if expect == "zero" and got > 0:
        console.print(f"[red bold]Expected 0 points from the starter code, got {got:g}[/]")
        return 1
    return 0


def record_oracle(console: Console, plan, results, grading: Grading) -> int:
    """``make oracle``: the references' comparisons, recorded one child per exercise, again one
    child per chapter (they must agree), and the labs twice (records that differ between the
    runs are not judged)."""
    got, possible = totals(results)
    if got < possible - 1e-9:
        console.print(
            f"[red bold]The references earn {got:g} / {possible:g}: the oracle is not written[/]"
        )
        for r in results:
            if r.score < r.item.points:
                console.print(f"  lost {r.item.points - r.score:g}: {escape(r.item.nodeid)} "
                              f"({r.status}): {escape(r.message[:300])}")  # fmt: skip
        return 1
    record = grading.recording
    tests = {r.item.nodeid for r in results if r.item.kind == "test"}
    entries = {k: v for k, v in record.items() if k in tests}
    console.print("graded tests again, one child per chapter: what a test compares must not "
                  "depend on what ran before it")  # fmt: skip
    differ = []
    for _ch, chapter_tests, _ in plan:
        grading.recording = again = {}
        for node, r in sorted(run_items(chapter_tests, grading, per_exercise=False).items()):
            if r.status != "passed":  # a timeout on a busy machine, or history again
                differ.append((node, f"did not pass: {r.status}: {r.message[:200]}"))
            elif again.get(node) != entries.get(node):
                differ.append((node, oracle.first_difference(entries[node], again[node])))
    if differ:
        console.print(f"[red bold]{len(differ)} graded test(s) differ when run after the rest "
                      "of their chapter; the oracle is not written:[/]")  # fmt: skip
        for node, why in differ[:20]:
            console.print(f"  {escape(node)}  {escape(why)}")
        console.print("Seed what they draw, or build what they compare inside the test.")
        return 1
    console.print("lab notebooks again: a record that differs between two runs is not judged")
    for ch, _, labs_ in plan:
        again = {}
        source = manifest.notebook_path(ch)
        if labs_ and all(r.score >= r.item.points
                         for r in labs.grade_lab(labs_, source, source, grading, record=again).values()):  # fmt: skip
            entries.update({k: merged for k, v in again.items()
                            if (merged := labs.merge(record[k], v)) is not None})  # fmt: skip
    oracle.write(entries)
    console.print(f"wrote {oracle.PATH.relative_to(config.ROOT)} ({len(tests)} tests, "
                  f"{len(entries) - len(tests)} lab tasks)")  # fmt: skip
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
