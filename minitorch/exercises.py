"""The exercise mechanism: one decorator, three modes.

Every exercise is a stub in ``minitorch/`` decorated with ``@exercise("C.N")``.
Its reference implementation is the function of the same name in
``solutions/reference/chC.py``. Which of the two runs is a run-time setting:

* ``learner``    (default) your code everywhere ("integrated");
* ``reference``  the reference solutions everywhere (the book, ``make check-solutions``);
* ``isolated``   your code only for the exercises in *focus*, the reference elsewhere.
  The grader grades every exercise with its focus set to that exercise, so a bug
  in 1.2 never costs points in 1.9, and you can start at any chapter. In a learner
  repository the references of chapters not yet released are absent: their
  exercises run your code.

Set it with the environment variables ``MINITORCH_MODE`` and ``MINITORCH_FOCUS``
(``MINITORCH_FOCUS=3`` is all of chapter 3, ``MINITORCH_FOCUS=1.2,1.4`` two
exercises), or at run time with :func:`set_mode` and the :func:`focus` context
manager. A lab notebook for chapter 3 starts with ``minitorch.set_mode("isolated", focus="3")``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
from dataclasses import dataclass
from typing import Callable, Iterator

MODES = ("learner", "reference", "isolated")


@dataclass
class Exercise:
    id: str  # "C.N"
    stub: Callable
    name: str

    @property
    def chapter(self) -> int:
        return int(self.id.split(".")[0])

    def reference(self) -> Callable:
        module = importlib.import_module(f"solutions.reference.ch{self.chapter}")
        try:
            return getattr(module, self.name)
        except AttributeError:
            raise LookupError(
                f"Exercise {self.id}: solutions/reference/ch{self.chapter}.py has no {self.name}()"
            ) from None


REGISTRY: dict[str, Exercise] = {}

_state = {"mode": "learner", "focus": frozenset()}


def _parse_focus(focus) -> frozenset:
    if focus is None:
        return frozenset()
    if isinstance(focus, (int, str)):
        focus = str(focus).split(",")
    return frozenset(str(f).strip() for f in focus if str(f).strip())


def set_mode(mode: str, focus=None) -> None:
    """Choose whose code runs: ``"learner"``, ``"reference"`` or ``"isolated"``.

    ``focus`` names chapters (``3``) or exercises (``"1.2,1.4"``) that use your
    code in isolated mode. While ``MINITORCH_MODE_FIXED=1`` is set (the grader
    and the book build set it) the call changes nothing, so one notebook can be
    run on your code or on the reference solutions from outside.
    """
    if os.environ.get("MINITORCH_MODE_FIXED") == "1":
        return
    _set(mode, focus)


def _set(mode: str, focus) -> None:
    if mode not in MODES:
        raise ValueError(f"set_mode: unknown mode {mode!r}; use one of {', '.join(MODES)}")
    _state["mode"] = mode
    _state["focus"] = _parse_focus(focus)
    _cache.clear()


def get_mode() -> tuple[str, frozenset]:
    return _state["mode"], _state["focus"]


@contextlib.contextmanager
def focus(ids) -> Iterator[None]:
    """Temporarily set the focus (used by the grader around each graded test)."""
    old = _state["focus"]
    _state["focus"] = _parse_focus(ids)
    _cache.clear()
    try:
        yield
    finally:
        _state["focus"] = old
        _cache.clear()


def uses_learner_code(ex_id: str) -> bool:
    mode, foc = _state["mode"], _state["focus"]
    if mode == "learner":
        return True
    if mode == "reference":
        return False
    return ex_id in foc or ex_id.split(".")[0] in foc


_cache: dict[str, Callable] = {}


def implementation(ex_id: str) -> Callable:
    """The function that runs for exercise ``ex_id`` under the current mode.

    Compiled backends (Numba) call this to get a plain Python function to compile.
    """
    fn = _cache.get(ex_id)
    if fn is None:
        ex = REGISTRY[ex_id]
        fn = ex.stub if uses_learner_code(ex_id) else _reference(ex)
        _cache[ex_id] = fn
    return fn


def _reference(ex: Exercise) -> Callable:
    """The reference, or in a learner repository without it (``make student-release``
    keeps only the references of released chapters) the learner's own code."""
    try:
        return ex.reference()
    except ModuleNotFoundError as e:
        if e.name not in (
            "solutions",
            "solutions.reference",
            f"solutions.reference.ch{ex.chapter}",
        ):
            raise
        return ex.stub


def exercise(ex_id: str) -> Callable[[Callable], Callable]:
    """Mark ``fn`` as the stub of exercise ``ex_id``; calls go to the implementation for the mode."""

    def decorate(stub: Callable) -> Callable:
        if ex_id in REGISTRY:
            raise ValueError(f"exercise {ex_id} is defined twice")
        REGISTRY[ex_id] = Exercise(ex_id, stub, stub.__name__)

        @functools.wraps(stub)
        def call(*args, **kwargs):
            fn = _cache.get(ex_id) or implementation(ex_id)
            if fn is stub and _GRADING:
                return _plain_result(ex_id, fn(*args, **kwargs))
            return fn(*args, **kwargs)

        call.exercise_id = ex_id
        call.stub = stub
        call.implementation = lambda: _cache.get(ex_id) or implementation(ex_id)
        return call

    return decorate


_GRADING = os.environ.get("MINITORCH_MODE_FIXED") == "1"
_BASES = (bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset)
# What a test's comparison of a result goes through; a subclass that redefines one could fool it.
_HOOKS = frozenset(
    "__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __len__ __iter__ __getitem__ "
    "__contains__ __int__ __float__ __index__ __abs__ __sub__ __rsub__ __array__ __class__ "
    "__getattribute__ __getattr__ __instancecheck__ __array_ufunc__ __array_function__".split()
)


def _plain_result(ex_id: str, value, depth: int = 0):
    """While grading, a learner result made of builtin or numpy values must compare honestly.

    A subclass that redefines comparison (an ``int`` whose ``==`` is always
    true) or any ndarray subclass could fool a test's ``got == want``; the
    grader refuses it here. A ``NamedTuple`` or ``defaultdict`` is fine.
    """
    cls, numpy_types, numpy_bases = type(value), *_numpy()
    if cls in _BASES or value is None or depth > 4 or cls in numpy_types:
        pass
    elif isinstance(value, _BASES + numpy_bases):
        base = next(b for b in cls.__mro__[1:] if b in _BASES + numpy_bases)
        own = [k for k in cls.__mro__[: cls.__mro__.index(base)] if not _stdlib(k)]
        hooks = sorted({h for k in own for h in _HOOKS if h in vars(k)})
        if hooks or base in numpy_bases:
            raise TypeError(
                f"Exercise {ex_id} returned a {cls.__name__}, a subclass of {base.__name__}"
                + (f" that redefines {hooks[0]}" if hooks else "")
                + f": return a plain {base.__name__}"
            )
    if isinstance(value, (tuple, list, set, frozenset)):
        for v in list(value)[:1000]:
            _plain_result(ex_id, v, depth + 1)
    elif isinstance(value, dict):
        for k, v in list(value.items())[:1000]:
            _plain_result(ex_id, k, depth + 1)
            _plain_result(ex_id, v, depth + 1)
    return value


def _stdlib(cls) -> bool:
    """A class of ``collections`` itself (``defaultdict``, ``OrderedDict``, ``Counter``)."""
    import collections

    return cls.__module__ == "collections" and getattr(collections, cls.__name__, None) is cls


def _numpy() -> tuple[set, tuple]:
    """numpy's own array and scalar types, and their bases (once numpy is imported)."""
    if _np_types:
        return _np_types[0]
    import sys

    np = sys.modules.get("numpy")
    if np is None:
        return set(), ()
    _np_types.append(({np.ndarray, *np.sctypeDict.values()}, (np.ndarray, np.generic)))
    return _np_types[0]


_np_types: list = []


def _from_env() -> None:
    mode = os.environ.get("MINITORCH_MODE", "learner").strip() or "learner"
    if mode == "integrated":
        mode = "learner"
    _set(mode, os.environ.get("MINITORCH_FOCUS"))


_from_env()
