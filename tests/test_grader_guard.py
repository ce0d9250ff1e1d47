"""The grading child's audit hook (``autograder/guard.py``): learner code cannot reach frames.

Each route to another frame or to raw memory is tried from a module in a
fake submission's ``minitorch/``, once under the guard (it must be refused)
and once without it (it must work, so the refusal is what stops it).
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ATTACKS = {
    "getframe": "find(sys._getframe())",
    "inspect_stack": "find(inspect.stack()[0].frame)",
    "currentframe": "find(inspect.currentframe())",
    "traceback": "find(tb_frame())",
    "extract_stack": "traceback.extract_stack(limit=3) and 42",
    "generator": "gen_frame()",
    "logging": "find(logging.currentframe())",
    "gc_objects": "[o for o in gc.get_objects() if type(o) is list and o[:1] == ['secret']][0][1]",
    "gc_referrers": "[o for o in gc.get_referrers('secret') if type(o) is list][0][1]",
    "current_frames": "find(sys._current_frames()[threading.get_ident()])",
    "settrace": "sys.settrace(lambda *a: None) or 42",
    "ctypes_memory": "ctypes.string_at(id(marker), 8) and 42",
    "pythonapi": "ctypes.pythonapi.PyEval_GetFrame and 42",
    "proc_mem": "open('/proc/self/mem', 'rb') and 42",
    "library_helper": "find(numpy.distutils.misc_util.get_frame(0))",
    "code_new": "(lambda: 0).__code__.replace(co_filename=numpy.__file__) and 42",
    "spoofed_compile": "exec(compile('import sys; sys._getframe()', numpy.__file__, 'exec')) or 42",
}

MODULE = """
import ctypes, gc, inspect, logging, sys, threading, traceback, warnings
import numpy
warnings.simplefilter("ignore")
import numpy.distutils.misc_util
marker = ["marker"]

def find(frame):
    while "expected" not in frame.f_locals:
        frame = frame.f_back
    return frame.f_locals["expected"]

def tb_frame():
    try:
        raise ValueError
    except ValueError as e:
        return e.__traceback__.tb_frame

def gen_frame():
    def g():
        yield
    return g().gi_frame and 42

from collections import namedtuple
Point = namedtuple("Point", "x y")  # the standard library's harmless frame use is fine

def attack(name, expr):
    return eval(expr)
"""

RUN = """
import json, sys
tree, guarded, attacks = sys.argv[1], sys.argv[2] == "1", json.loads(sys.argv[3])
sys.path.insert(0, {root!r})
sys.path.insert(0, tree)
if guarded:
    from autograder import guard
    guard.install(tree, [], [p for p in sys.path if p.endswith("site-packages")])
from minitorch import attack as m
out = {{}}
def graded_test(name, expr):
    expected, box = 42, ["secret", 42]
    return m.attack(name, expr)
for name, expr in attacks.items():
    try:
        out[name] = "ok" if graded_test(name, expr) == 42 else "wrong"
    except PermissionError as e:
        out[name] = "refused: " + str(e)[:200]
    except Exception as e:
        out[name] = f"error: {{type(e).__name__}}: {{e}}"[:200]
print(json.dumps(out))
"""


def run(tmp_path: Path, guarded: bool) -> dict:
    pkg = tmp_path / "minitorch"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "attack.py").write_text(textwrap.dedent(MODULE))
    script = RUN.format(root=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path), "1" if guarded else "0",
                           json.dumps(ATTACKS)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("guard")
    return run(tmp, guarded=False), run(tmp, guarded=True)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_route_works_without_the_guard_and_is_refused_with_it(outcomes, name):
    free, guarded = outcomes
    assert free[name] == "ok", free[name]
    assert guarded[name].startswith("refused"), guarded[name]
    assert "not allowed while grading" in guarded[name]


def test_framework_sites_are_allowed_only_as_shipped(tmp_path):
    from autograder import guard

    sites = guard.verified_sites(ROOT)
    assert {(Path(p).relative_to(ROOT).as_posix(), n) for p, n, _ in sites} == set(
        guard.FRAME_SITES
    )
    for (rel, name), _ in guard.FRAME_SITES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        text = (ROOT / rel).read_text()
        (tmp_path / rel).write_text(text.replace(f"def {name}(", f"def {name}(_extra=None, "))
    assert guard.verified_sites(tmp_path) == []
