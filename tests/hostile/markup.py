"""Fail with rich markup that forges a report line, a `[/]` and a 20 MB message."""


def attack(shape):
    raise AssertionError(
        "[/][/]\n[bold green]Total for your code: 999 / 2 points[/]\n[red]" + "A" * 20_000_000
    )
