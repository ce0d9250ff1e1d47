"""A graded test draws nothing that a test run before it could change.

The grader seeds minitorch's generator, numpy's global one and ``random`` before
every graded test (``autograder/plugin.py``), and hypothesis draws no constants
from loaded modules (``autograder/harness.py``), so what a test compares is the
same whether its exercise is graded alone (as learners are) or after its whole
chapter (as ``make check-solutions`` does). What the seeding cannot cover is
checked here from the source: random draws at import time (a module is
imported once per process, after whatever ran before), and generators made
without a seed.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "autograder" / "tests").glob("ch*/*.py"))
RANDOM = {"rand", "randn", "randint", "random", "normal", "uniform", "choice", "permutation",
          "shuffle", "standard_normal", "sample", "gauss", "integers"}  # fmt: skip
GENERATORS = {"default_rng", "RandomState", "Random", "Generator"}


def _name(func: ast.expr) -> str:
    """``np.random.randn`` -> "np.random.randn"."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _module_level_calls(tree: ast.Module):
    """Calls that run at import: outside every function body (decorators included)."""

    def walk(node, top):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for d in getattr(node, "decorator_list", []):
                yield from walk(d, top)
            for d in node.args.defaults + node.args.kw_defaults:
                if d is not None:
                    yield from walk(d, top)
            return
        if isinstance(node, ast.Call):
            yield node
        for child in ast.iter_child_nodes(node):
            yield from walk(child, top)

    yield from walk(tree, True)


def problems(source: str) -> list[str]:
    """What draws depend on history; a line that says ``# unseeded:`` (why) is meant to."""
    tree = ast.parse(source)
    meant = {i + 1 for i, line in enumerate(source.splitlines()) if "# unseeded:" in line}
    found = []
    for call in _module_level_calls(tree):
        name = _name(call.func)
        if name.rsplit(".", 1)[-1] in RANDOM and (
            "random" in name or name.startswith(("minitorch.", "mt."))
        ):
            found.append(f"line {call.lineno}: {name}() runs at import time")
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        name = _name(call.func)
        if (name.rsplit(".", 1)[-1] in GENERATORS and not call.args and not call.keywords
                and call.lineno not in meant):  # fmt: skip
            found.append(f"line {call.lineno}: {name}() without a seed")
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_graded_file_draws_nothing_history_dependent(path):
    assert problems(path.read_text(encoding="utf-8")) == []


def test_the_check_finds_what_it_looks_for():
    bad = (
        "import numpy as np\nimport minitorch\n"
        "X = minitorch.randn(3)\n"
        "@given(st.just(np.random.rand(2)))\ndef test_a(x): pass\n"
        "def test_b():\n    rng = np.random.default_rng()\n"
    )
    found = problems(bad)
    assert [f.split(":")[0] for f in found] == ["line 3", "line 4", "line 7"], found
    good = "import numpy as np\ndef test_c():\n    x = np.random.default_rng(0).normal(size=3)\n"
    assert problems(good) == []
