"""Which exercises are done: checked once, when a compiler pipeline is built.

A stub's body only raises ``NotImplementedError("Exercise C.N: ...")``. A stage of
the compiler (chapters 6-9) names the exercises it runs; the pipeline asks
:func:`missing` before it runs the stage and, if one is not done yet, leaves the
stage out and says why, instead of catching the stub's error deep inside.
"""

from __future__ import annotations

import dis

from .. import exercises

# what a body that only does ``raise NotImplementedError("...")`` compiles to
_RAISE_ONLY = {
    "RESUME", "NOP", "CACHE", "EXTENDED_ARG", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_CONST",
    "PUSH_NULL", "PRECALL", "CALL", "CALL_FUNCTION", "KW_NAMES", "RAISE_VARARGS",
    "COPY_FREE_VARS", "MAKE_CELL", "RETURN_CONST",
}  # fmt: skip
_checked: dict = {}  # code object -> only raises?


def only_raises(fn) -> bool:
    """Is ``fn`` an untouched stub (its body raises ``NotImplementedError`` and nothing else)?"""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    got = _checked.get(code)
    if got is None:
        ops = {i.opname for i in dis.get_instructions(code)}
        got = _checked[code] = (
            "NotImplementedError" in code.co_names and "RAISE_VARARGS" in ops and ops <= _RAISE_ONLY
        )
    return got


def done(ex_id: str) -> bool:
    """Does exercise ``ex_id`` have an implementation under the current mode?"""
    return not only_raises(exercises.implementation(ex_id))


def missing(ids) -> list[str]:
    """The exercises of ``ids`` that are not done yet, in order."""
    return [i for i in ids if i in exercises.REGISTRY and not done(i)]


def exercise_ids(chapter: int, first: int, last: int) -> tuple[str, ...]:
    """``("7.1", ..., "7.5")`` for ``exercise_ids(7, 1, 5)``."""
    return tuple(f"{chapter}.{n}" for n in range(first, last + 1))
