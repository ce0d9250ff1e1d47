"""``python -m autograder``: grade the learner's work (or the reference) and report.

    python -m autograder                  # every chapter, isolated grading
    python -m autograder --chapter 1      # one chapter
    python -m autograder --exercise 1.3   # one exercise's tests (no notebook)
    python -m autograder --integrated     # your code everywhere, no reference fallback
    python -m autograder --solutions      # the reference solutions: must earn full marks
    python -m autograder --expect zero    # the untouched starter code: must earn nothing
    python -m autograder --record-oracle  # record the references' comparisons (make oracle)

Exit code 0 whatever the score (unless --solutions or --expect is given and
not met); 2 when the grader itself could not run.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import integrity, labcheck, manifest, oracle, sandbox, vault
from .notebooks import grade_lab
from .report import print_report, totals, write_results_json
from .runner import run_items
from .submission import problems as file_problems


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.split("\n")[0])
    p.add_argument("--chapter", "-c", type=int, action="append", help="grade only this chapter")
    p.add_argument("--exercise", "-e", help="grade only this exercise, e.g. 1.3")
    p.add_argument("--solutions", action="store_true", help="grade the reference solutions")
    p.add_argument(
        "--integrated",
        action="store_true",
        help="use your code for every chapter (default: isolated, reference elsewhere)",
    )
    p.add_argument(
        "--expect", choices=["full", "zero"], help="exit 1 unless the score is full / zero"
    )
    p.add_argument("--no-notebooks", action="store_true", help="skip the lab notebooks")
    p.add_argument("--record-oracle", action="store_true",
                   help="grade the references and record their comparisons in autograder/oracle")  # fmt: skip
    p.add_argument("--json", default="build/results.json", help="where to write results.json")
    p.add_argument(
        "--timeout",
        type=float,
        default=90,
        help="CPU seconds per graded test (the wall clock allows 3x)",
    )
    p.add_argument(
        "--submission", type=Path, default=manifest.ROOT,
        help="the folder holding the minitorch/ (and exercises/) to grade",
    )  # fmt: skip
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.record_oracle:
        args.solutions, args.no_notebooks, args.chapter, args.exercise = True, False, None, None
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    out = Path(args.json)
    out.unlink(missing_ok=True)  # a run that fails leaves no stale scores behind
    results: list = []
    try:
        return grade(args, console, out, results)
    except Exception as e:  # the grader's own failure (a full disk, say): still a report
        why = f"{type(e).__name__}: {e}"
        console.print(f"[red bold]The grader could not finish: {escape(why)}[/]")
        console.print(f"{len(results)} results were complete; the rest earn nothing this run.")
        try:
            write_results_json(results, out, 0.0, {"error": f"the grader could not finish: {why}"})
            console.print(f"[dim]results.json written to {out}[/]")
        except OSError as e2:
            console.print(f"[red]results.json could not be written either: {escape(str(e2))}[/]")
        return 2


def grade(args, console: Console, out: Path, results: list) -> int:
    start = time.monotonic()
    mode = "reference" if args.solutions else ("learner" if args.integrated else "isolated")
    expect = "full" if args.solutions and not args.expect else args.expect
    sandbox.become_subreaper()
    if not manifest.NOTEBOOKS.exists() and vault.VAULT.exists():  # a student repository
        private = Path(tempfile.mkdtemp(prefix="lab-sources-"))
        atexit.register(shutil.rmtree, private, True)
        vault.extract("solutions/notebooks/*.ipynb", private)
        manifest.NOTEBOOKS = private / "solutions" / "notebooks"
    tampered = integrity.problems()
    if tampered and not args.solutions:
        console.print("[red bold]The grader's own files differ from autograder/hashes.json:[/]")
        for line in tampered[:20]:
            console.print(f"  {escape(line)}", highlight=False)
        console.print("Restore them (git checkout autograder solutions minitorch/exercises.py).")
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
        labs = [] if (args.no_notebooks or args.exercise) else manifest.notebook_items(ch)
        plan.append((ch, tests, labs))
    total = sum(len(t) + len(n) for _, t, n in plan)

    expected, why = ({}, "") if args.record_oracle else oracle.load()
    if expected is None:
        console.print(f"[yellow]Grading without the references' recorded comparisons: {why}[/]")
    record: dict | None = {} if args.record_oracle else None
    broken = file_problems(args.submission)
    if broken:
        console.print("[red bold]Problems with your files[/] (the exercises they define score 0; "
                      "everything else is graded):")  # fmt: skip
        for rel, problem in broken.items():
            console.print(f"  {escape(rel)}: {escape(problem)}", highlight=False)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.fields[current]}"), console=console,
                  transient=True) as progress:  # fmt: skip
        task = progress.add_task("grading", total=total, current="")

        def on_event(nodeid, result):
            if result is None:
                progress.update(task, current=nodeid.split("::")[-1])
            else:
                progress.advance(task)

        for ch, tests, labs in plan:
            progress.update(task, description=f"chapter {ch}")
            if tests:  # the oracle is recorded one child per exercise, as learners are graded
                results += run_items(tests, mode, focus=None, test_timeout=args.timeout,
                                     progress=on_event, submission=args.submission,
                                     oracle=expected, record=record, problems=broken,
                                     per_exercise=True if record is not None else None).values()  # fmt: skip
            if labs:
                progress.update(task, current=f"lab notebook ch{ch}")
                source = manifest.notebook_path(ch)
                submission = (
                    source if args.solutions else args.submission / "exercises" / source.name
                )
                lab = grade_lab(labs, source, submission, mode, oracle=expected, record=record,
                                package=args.submission).values()  # fmt: skip
                results += lab
                progress.advance(task, len(labs))

    results.sort(key=lambda r: (r.item.chapter, manifest.exercise_sort_key(r.item.exercise)))
    who = (
        "reference solutions"
        if args.solutions
        else ("your code" + (" (integrated)" if args.integrated else ""))
    )
    seconds = time.monotonic() - start
    write_results_json(results, out, seconds, {"mode": mode, "chapters": chapters,
                                               "problems": broken})  # fmt: skip
    print_report(results, manifest.exercises(), console, f"Total for {who}")
    console.print(f"[dim]results.json written to {out} ({seconds:.0f} s)[/]")

    got, possible = totals(results)
    if record is not None and got >= possible - 1e-9:
        tests = {r.item.nodeid for r in results if r.item.kind == "test"}
        entries = {k: v for k, v in record.items() if k in tests}
        console.print("graded tests again, one child per chapter: what a test compares must not "
                      "depend on what ran before it")  # fmt: skip
        differ = []
        for _ch, chapter_tests, _ in plan:
            again: dict = {}
            second = run_items(chapter_tests, mode, test_timeout=args.timeout,
                               submission=args.submission, record=again, per_exercise=False)  # fmt: skip
            for node, r in sorted(second.items()):
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
        for ch, _, labs in plan:  # a second run of the labs
            again: dict = {}
            source = manifest.notebook_path(ch)
            if labs and all(
                r.score >= r.item.points
                for r in grade_lab(labs, source, source, mode, record=again).values()
            ):
                entries.update({k: merged for k, v in again.items()
                                if (merged := labcheck.merge(record[k], v)) is not None})  # fmt: skip
        oracle.write(entries)
        console.print(f"wrote {oracle.PATH.relative_to(manifest.ROOT)} ({len(tests)} tests, "
                      f"{len(entries) - len(tests)} lab tasks)")  # fmt: skip
    if expect == "full" and got < possible - 1e-9:
        console.print(f"[red bold]Expected full marks, got {got:g} / {possible:g}[/]")
        return 1
    if expect == "zero" and got > 0:
        console.print(f"[red bold]Expected 0 points from the starter code, got {got:g}[/]")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
