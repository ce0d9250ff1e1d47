"""The grade report: a table in the terminal and Gradescope's results.json."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .manifest import ExerciseInfo, exercise_sort_key
from .protocol import Result, full_credit, shown

STYLE = {"passed": "green", "failed": "red", "crashed": "red", "timeout": "red",
         "not run": "yellow", "excluded": "dim"}  # fmt: skip


def totals(results: list[Result]) -> tuple[float, float]:
    counted = [r for r in results if r.counted]
    return sum(r.score for r in counted), sum(r.item.points for r in counted)


def _figures(r: Result) -> str:
    if not r.figures:
        return ""
    main = r.item.metric
    limit = r.item.bands[0][0] if r.item.bands else None
    parts = [f"{main}={shown(r.figures[main], limit)}"] if main in r.figures else []
    if r.item.bands:
        parts[-1:] = [f"{parts[-1]} ({full_credit(r.item)})"] if parts else []
    parts += [f"{k}={v:.3g}" for k, v in r.figures.items() if k != main]
    return ", ".join(parts)


def _one_line(r: Result) -> str:
    first = (r.message or r.status).strip().splitlines()[0] if (r.message or r.status) else ""
    return first[:160] + (f"  → {r.where}" if r.where else "")


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _details(r: Result, lines: int = 6) -> list[str]:
    """The failing input under the first line (``shape = (2, 2)``, hypothesis's example)."""
    rest = (r.message or "").strip().splitlines()[1:]
    shown = [t[:160] for t in rest if t.strip()][:lines]
    return shown + (["..."] if len([t for t in rest if t.strip()]) > lines else [])


def print_report(results: list[Result], info: dict[str, ExerciseInfo], console: Console,
                 title: str, official: bool = False) -> None:  # fmt: skip
    by_chapter: dict[int, list[Result]] = defaultdict(list)
    for r in results:
        by_chapter[r.item.chapter].append(r)
    for ch in sorted(by_chapter):
        rs = by_chapter[ch]
        got, possible = totals(rs)
        table = Table(title=f"Chapter {ch}: {got:g} / {possible:g} points", title_justify="left")
        table.add_column("exercise")
        table.add_column("what")
        table.add_column("points", justify="right")
        table.add_column("tests", justify="right")
        groups: dict[str, list[Result]] = defaultdict(list)
        for r in rs:
            key = r.item.exercise if r.item.kind != "benchmark" else f"{r.item.exercise} bench"
            groups[key].append(r)
        for key in sorted(
            groups, key=lambda k: exercise_sort_key(k.split()[0] if "lab" not in k else k)
        ):
            g = groups[key]
            e_got, e_possible = totals(g)
            ok = sum(r.status == "passed" for r in g)
            counted = sum(r.counted for r in g)
            ex = info.get(key.split()[0])
            what = ex.name if ex else ("lab notebook" if key.startswith("lab") else "")
            if key.endswith("bench"):
                what = "benchmark: " + ", ".join(r.item.name.removeprefix("bench_") for r in g)
            style = (
                "green" if counted and e_got == e_possible else ("red" if e_got == 0 else "yellow")
            )
            if not counted:
                style = "dim"
            table.add_row(key, what, f"[{style}]{e_got:g} / {e_possible:g}[/]", f"{ok}/{len(g)}")
        console.print(table)
        benches = [r for r in rs if r.item.kind == "benchmark" and r.counted]
        for r in benches:
            text = r.message.strip().splitlines() if r.message.strip() else [""]
            figures = _figures(r) or text[0] if (r.figures or r.message) else ""
            console.print(
                f"  [bold]{r.item.name}[/] ({r.item.exercise}): {escape(figures)}", highlight=False
            )
        bad = [r for r in rs if r.counted and r.score < r.item.points - 1e-9]
        if bad:
            n_bench = sum(r.item.kind == "benchmark" for r in bad)
            counts = [_count(len(bad) - n_bench, "test"), _count(n_bench, "benchmark")]
            console.print(
                f"  [bold]What went wrong[/] ({', '.join(c for c in counts if not c.startswith('0 '))};"
                " `make grade EX=C.N` reruns one exercise):"
            )
            # Tests of one exercise that fail the same way get one line.
            lines: dict[tuple, list[Result]] = defaultdict(list)
            for r in bad:
                lines[(r.item.exercise, r.item.kind, _one_line(r))].append(r)
            for (ex, kind, line), group in lines.items():
                colour = STYLE.get(group[0].status, "red")
                plural = "benchmarks" if kind == "benchmark" else "tests"
                names = group[0].item.name if len(group) == 1 else f"{len(group)} {plural}"
                console.print(f"  [{colour}]{ex:>6} {names}[/]: {escape(line)}", highlight=False)
                for detail in _details(group[0]):
                    console.print(f"         {escape(detail)}", highlight=False)
        excluded = [r for r in rs if r.status == "excluded"]
        for r in excluded:
            console.print(
                f"  [dim]{r.item.exercise} {r.item.name}: not run ({escape(r.message)});"
                " left out of the total[/]"
            )
        console.print()
    got, possible = totals(results)
    console.print(f"[bold]{title}: {got:g} / {possible:g} points[/]")
    if not official:
        console.print("[dim]Local grading: feedback on your machine. The grade that counts is "
                      "the official run (Gradescope).[/]")  # fmt: skip


def write_results_json(results: list[Result], path: Path, seconds: float, meta: dict) -> None:
    tests = []
    for r in results:
        entry = {
            "name": f"{r.item.exercise} {r.item.name}",
            "score": round(r.score, 4),
            "max_score": r.item.points if r.counted else 0,
            "status": "passed" if r.status == "passed" else "failed",
            "output": (f"[{r.status}] " + (r.message or "")).strip()
            + (f"\nwhere: {r.where}" if r.where else ""),
            "visibility": "visible",
            "extra_data": {
                "kind": r.item.kind,
                "status": r.status,
                "figures": r.figures,
                "duration_s": round(r.duration, 3),
            },  # fmt: skip
        }
        tests.append(entry)
    got, possible = totals(results)
    data = {"score": round(got, 4), "max_score": possible, "execution_time": round(seconds, 1),
            "tests": tests, "extra_data": meta}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2))
    os.replace(partial, path)  # atomic: a reader sees the old file or the whole new one
