"""An audit hook in the grading child: learner code may not reach other frames or raw memory.

A graded test computes its expected values in the same process as the
learner's code, so a function that walks up to the test's frame
(``inspect.stack()[1].frame.f_locals["expected"]``), scans ``gc.get_objects()``
or reads memory through ``ctypes`` could return the answer without computing
it. A frame object, once held, leads everywhere (``f_back`` and ``f_locals``
are not audited), so the hook refuses the ways of getting one:
``sys._getframe``, ``sys._current_frames``, a traceback's, generator's or
coroutine's frame, ``gc``'s object walks, trace and profile functions,
``ctypes`` memory and symbol access, and ``/proc/*/mem``.

Who asks decides. The asking frame is the innermost one, looking through
the standard library's frame helpers (``inspect``, ``traceback``) to the code
that called them. Learner code (the submission's ``minitorch/``, the
references, code it compiled) is refused, except the few framework functions
that read a caller's name or line (``FRAME_SITES``), and only while their
source is what the grader shipped (the parent checks, :func:`verified_sites`).
Libraries are refused only while learner code is on the stack beneath them,
except those that must (Numba's CUDA simulator tells shared arrays apart by
call site). The grader's own code and the tests are never refused.

A refused call raises ``PermissionError`` naming what was asked and why; the
test fails with that message. The hook costs a set lookup per audit event.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import sysconfig
import threading

# (file in the submission, function): framework code that reads its caller's
# name or line. The parent allows one only when its source hashes as shipped.
FRAME_SITES = {
    ("minitorch/tracing/graph.py", "user_location"):
        "85fdd63c056d50549b09a9ac9f08842e8141148f5431d199e1f23b7e4877b519",
    ("minitorch/tracing/tracer.py", "_data"):
        "c7669a3ee4856c7491057b2c6fd6576424499a5a2fe7b9ec9b2115f9e63c792a",
    ("minitorch/cuda/traffic.py", "shared_array"):
        "bbdfe7a7380bebb4f0316183f1c30e5c697f1bea8fab6494a581be2c6e9c8788",
}  # fmt: skip
# What libraries may do while learner code is on the stack beneath them (what
# the references need, measured with AUTOGRADER_GUARD_LOG): anything else is
# refused then, since some library helpers hand a caller's frame back.
LIBRARY_ALLOWED = {
    "frame": (
        "numba/",
        "numba_cuda/numba/cuda/simulator/",
        "hypothesis/",
        "typing_extensions.py",
        "scipy/_lib/_bunch.py",
        "_pytest/config/",
    ),
    "ctypes": ("llvmlite/", "numba/", "threadpoolctl.py", "cuda/pathfinder/"),
    "code": ("hypothesis/internal/reflection.py", "joblib/memory.py", "numba/"),
    "gc": ("hypothesis/internal/entropy.py",),
    "threads": (),
}
# Standard-library helpers that read only a caller's module name or line.
HARMLESS_STDLIB = ("collections/__init__.py", "enum.py", "typing.py", "dataclasses.py")

EVENTS = {
    "sys._getframe": "frame", "object.__getattr__": "frame",
    "sys._current_frames": "threads", "sys._current_exceptions": "threads",
    "sys.settrace": "threads", "sys.setprofile": "threads",
    "gc.get_objects": "gc", "gc.get_referrers": "gc", "gc.get_referents": "gc",
    "ctypes.dlsym": "ctypes", "ctypes.dlopen": "ctypes", "ctypes.cdata": "ctypes",
    "ctypes.string_at": "ctypes", "ctypes.wstring_at": "ctypes", "ctypes.cdata/buffer": "ctypes",
    "code.__new__": "code",
}  # fmt: skip
FRAME_ATTRS = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
WATCHED = set(EVENTS) | {"open", "compile"}


def _find(source: str, name: str) -> tuple[str, int] | None:
    """(sha256 of function ``name``'s source, its code's first line), or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            text = ast.get_source_segment(source, node) or ""
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return hashlib.sha256(text.encode()).hexdigest(), first
    return None


def site_digests(root) -> dict[str, tuple[str, int]]:
    """``FRAME_SITES`` as found in the tree at ``root``: {"file::name": (digest, line)}."""
    out = {}
    for rel, name in FRAME_SITES:
        try:
            found = _find((root / rel).read_text(encoding="utf-8"), name)
        except OSError:
            continue
        if found:
            out[f"{rel}::{name}"] = found
    return out


def verified_sites(tree) -> list[tuple[str, str, int]]:
    """The frame sites of the grading ``tree`` whose source is as shipped."""
    ok = []
    for key, (digest, line) in site_digests(tree).items():
        rel, name = key.split("::")
        if FRAME_SITES.get((rel, name)) == digest:
            ok.append((str(tree / rel), name, line))
    return ok


def _same_source(source, filename: str) -> bool:
    try:
        with open(filename, "rb") as f:
            disk = f.read()
    except OSError:
        return False
    return source == disk or (isinstance(source, str) and source.encode() == disk)


_FORMS = (os.path.abspath, os.path.realpath)


class _Guard:
    def __init__(self, tree: str, sites: list[tuple[str, str, int]], libs: list[str],
                 log: str | None = None):  # fmt: skip
        self.learner = (os.path.join(tree, "minitorch") + os.sep,
                        os.path.join(tree, "solutions") + os.sep)  # fmt: skip
        self.exempt = os.path.join(tree, "minitorch", "exercises.py")
        self.grader = (os.path.join(tree, "autograder") + os.sep,)
        paths = sysconfig.get_paths()
        # Code names its file by the path it was imported through: a venv reached
        # through a symlink gives unresolved names, so both forms count.
        self.stdlib = tuple({os.path.join(f(paths["stdlib"]), "") for f in _FORMS})
        libs = [*libs, paths["purelib"], paths["platlib"]]
        self.libs = tuple({os.path.join(f(p), "") for p in libs for f in _FORMS})
        self.sites = set(sites)
        self.busy: set[int] = set()
        self.kinds: dict[str, str] = {}  # file name -> kind
        self.boot = sys._getframe(2).f_code  # the child's bootstrap, a string: the grader's
        try:
            self.log = open(log, "a", encoding="utf-8") if log else None  # noqa: SIM115
        except OSError:
            self.log = None  # then it refuses

    def kind(self, filename: str) -> str:
        """'grader', 'stdlib', 'library' or 'learner' (anything else: compiled strings too)."""
        if filename.startswith(self.grader):
            return "grader"
        if filename.startswith(self.learner):
            return "grader" if filename == self.exempt else "learner"
        if filename.startswith(self.libs):
            return "library"
        if filename.startswith(self.stdlib) or filename.startswith("<frozen"):
            return "stdlib"
        return "learner"

    def refusal(self, event: str, args: tuple) -> str:
        """Why this event is refused, or ''."""
        if event == "open":
            p = os.fsdecode(args[0])
            if p.startswith("/proc/") and p.rstrip("/").endswith(("/mem", "/pagemap")):
                return "reading process memory"
            return ""
        what = "code" if event == "compile" else EVENTS[event]
        frame = sys._getframe(2)  # past this method and the hook: the audited call's frame
        asker, kinds = None, self.kinds
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code.co_filename) or kinds.setdefault(
                code.co_filename, self.kind(code.co_filename)
            )
            kind = "grader" if code is self.boot else kind
            if asker is not None:  # a library asked: is learner code beneath it?
                if kind == "learner":
                    return f"{asker} called from learner code"
            elif kind == "grader":  # the tests, the plugin: trusted unless learner code called them
                asker = "grader code"
            elif code.co_name == "<module>" and kind != "learner" and event != "compile":
                return ""  # a module's own import-time code (ctypes opens libraries)
            elif kind == "stdlib":  # look through inspect, traceback, ... to who called them
                if what == "frame" and code.co_filename.endswith(HARMLESS_STDLIB):
                    return ""
            elif kind == "library":
                name = code.co_filename.rsplit("site-packages" + os.sep, 1)[-1]
                if name.startswith(LIBRARY_ALLOWED[what]):
                    return ""
                asker = f"{name}:{code.co_name}"
            else:
                site = (code.co_filename, code.co_name, code.co_firstlineno)
                if what == "frame" and site in self.sites:
                    return ""
                if event == "compile" and _same_source(args[0], args[1]):
                    return ""  # importing a library's module from source
                return f"{code.co_filename.rsplit(os.sep, 1)[-1]}:{frame.f_lineno}"
            frame = frame.f_back
        return ""

    def __call__(self, event: str, args: tuple) -> None:
        if event not in WATCHED:  # most events: one set lookup
            return
        if event == "object.__getattr__":  # f_code, __code__: as cheap as possible
            if args[1] not in FRAME_ATTRS:
                return
        elif event == "open":
            if not isinstance(args[0], (str, bytes)) or not os.fsdecode(args[0]).startswith(
                "/proc/"
            ):
                return
        elif event == "compile":  # code claiming to be a library's must be that library's
            if not isinstance(args[1], str) or self.kind(args[1]) == "learner":
                return
        me = threading.get_ident()
        if me in self.busy:
            return
        self.busy.add(me)
        try:
            why = self.refusal(event, args)
        finally:
            self.busy.discard(me)
        if why:
            what = f"{event} {args[1]!r}" if event == "object.__getattr__" else event
            if self.log:
                self.log.write(f"{what}\t{why}\n")
                self.log.flush()
                return
            raise PermissionError(
                f"{what} is not allowed while grading (asked by {why}): code under test may "
                "not look at other frames or raw memory, where the tests keep expected values"
            )


def install(tree: str, sites: list[tuple[str, str, int]], libs: list[str]) -> None:
    """Add the hook (it cannot be removed); ``libs``: the site-packages folders.

    ``AUTOGRADER_GUARD_LOG=<file>`` (passed on by the grader) logs what would be refused instead.
    """
    sys.addaudithook(_Guard(tree, sites, libs, os.environ.get("AUTOGRADER_GUARD_LOG")))
