"""Sizes that remember where they came from, so that a trace's tests on them can be guarded.

Chapter 9 reuses one trace for every size of a dynamic dim. That is only right if
Python took the same decisions at the new size: ``if x.shape[0] > 12`` traced at 6
must not serve 16. So when chapter 9 builds a dynamic entry it traces once more with
a :class:`SizeLog` on the tracer: every dim a traced tensor's ``.shape`` gives is then
a :class:`Size`, an ``int`` carrying an expression (``dim k d``: dim ``d`` of the
``k``-th node of the graph). Arithmetic keeps the expression; a comparison, ``bool``,
``min``/``max`` (comparisons) and a use as a Python int (``range``, indexing, ``int``)
are *checks*: their expression and result are logged. The entry then serves a size
only where every check gives the result it gave when traced (:func:`failures`).

What the op layer does with sizes is not a check: an int it makes (``reshape(B, T, C)``)
lands in a node's attributes or a constant, and its comparisons are shape bookkeeping
(a gradient's shape against its input's); chapter 9 compares the programs traced at
other sizes for those instead.
"""

from __future__ import annotations

import builtins
import contextlib
import operator
import sys

_COMPARE = {
    "__lt__": "<",
    "__le__": "<=",
    "__gt__": ">",
    "__ge__": ">=",
    "__eq__": "==",
    "__ne__": "!=",
}
_TEST = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
         "==": operator.eq, "!=": operator.ne}  # fmt: skip
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
          "%": operator.mod, "**": operator.pow, "<<": operator.lshift, ">>": operator.rshift,
          "&": operator.and_, "|": operator.or_, "^": operator.xor}  # fmt: skip
_DUNDER = {"+": "add", "-": "sub", "*": "mul", "//": "floordiv", "%": "mod", "**": "pow",
           "<<": "lshift", ">>": "rshift", "&": "and", "|": "or", "^": "xor"}  # fmt: skip
# Modules that hand sizes to ops and check shapes (the exercises' references too): what
# they do with a size is no check.
_OP_LAYER = ("minitorch.core", "minitorch.tensor", "minitorch.backends", "minitorch.tracing",
             "minitorch.autograd", "minitorch.compile", "minitorch.exercises",
             "solutions.")  # fmt: skip


def by_user(depth: int) -> bool:
    """Whether the code ``depth`` frames above the caller is outside the op layer (the
    user's, or a model's): what it does with a traced value is a decision."""
    return not sys._getframe(depth + 1).f_globals.get("__name__", "").startswith(_OP_LAYER)


class SizeLog:
    """The checks one trace made on sizes: ``(op, left, right, result, kind)`` in order."""

    def __init__(self):
        self.checks: list[tuple] = []
        self.live = True  # False once the trace ends: a Size is then a plain int
        self._sizes: dict = {}

    def shape(self, node, shape: tuple) -> tuple:
        """``shape`` (node's) as Sizes, made once per node."""
        out = self._sizes.get(id(node))
        if out is None or out[0] is not node:
            out = self._sizes[id(node)] = (node, tuple(
                Size(n, ("dim", node, d), self) for d, n in enumerate(shape)
            ))  # fmt: skip
        return out[1]

    def record(self, op: str, left, right, result: bool, kind: str = "compare") -> None:
        if self.live:
            self.checks.append((op, left, right, bool(result), kind))

    def finish(self, nodes: list) -> list[tuple]:
        """The checks with every node replaced by its index in ``nodes`` (the traced graph);
        stops logging. A check on a node not in ``nodes`` (another graph) raises KeyError."""
        self.live = False
        index = {id(n): k for k, n in enumerate(nodes)}

        def fix(e):
            if e[0] == "dim":
                return ("dim", index[id(e[1])], e[2])
            return (e[0], *[fix(x) if isinstance(x, tuple) else x for x in e[1:]])

        return [(op, fix(a), fix(b), r, kind) for op, a, b, r, kind in self.checks]


def _value(x):
    return int.__int__(x) if isinstance(x, Size) else x


def _expr(x):
    if isinstance(x, Size):
        return x.expr
    return ("const", x)


def _arith(name: str, reflected: bool):
    fn = _ARITH[name]

    def method(self, other):
        if isinstance(other, bool) or not isinstance(other, int):
            if isinstance(other, float):  # the result is no int: specialise on the size
                self._number("used in float arithmetic")
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        value = fn(_value(a), _value(b))
        if not isinstance(value, int):  # a negative power: a float
            self._number("raised to a negative power")
            return value
        return Size(value, (name, _expr(a), _expr(b)), self.log)

    return method


def _compare(op: str):
    fn = _TEST[op]

    def method(self, other):
        if not isinstance(other, (int, float)):
            return NotImplemented
        result = fn(int.__int__(self), _value(other))
        if by_user(1):
            self.log.record(op, self.expr, _expr(other), result)
        return result

    return method


class Size(int):
    """An int that is a size of a traced tensor (or computed from sizes); see module doc."""

    def __new__(cls, value: int, expr: tuple, log: SizeLog):
        obj = super().__new__(cls, value)
        obj.expr, obj.log = expr, log
        return obj

    def _as_int(self, how: str) -> int:
        value = int.__int__(self)
        self.log.record("==", self.expr, ("const", value), True, how)
        return value

    def _number(self, how: str) -> int:
        """The size as a plain int, for code two frames up: a check unless that is the op
        layer (its ints become attributes or constants, compared across sizes instead)."""
        return self._as_int(how) if by_user(2) else int.__int__(self)

    def __int__(self) -> int:
        return self._number("used as a Python int")

    def __index__(self) -> int:
        return self._number("used as an index")

    def __float__(self) -> float:
        return float(self._number("used as a float"))

    def __truediv__(self, other):
        return self._number("divided with /") / other

    def __rtruediv__(self, other):
        return other / self._number("divided with /")

    def __bool__(self) -> bool:
        result = int.__int__(self) != 0
        if by_user(1):
            self.log.record("!=", self.expr, ("const", 0), result)
        return result

    def __neg__(self):
        return Size(-int.__int__(self), ("-", ("const", 0), self.expr), self.log)

    def __pos__(self):
        return self

    def __round__(self, ndigits=None):  # an int already: round, trunc, floor and ceil keep it
        return self if ndigits is None else int.__round__(self, ndigits)

    __trunc__ = __floor__ = __ceil__ = __pos__

    def __divmod__(self, other):
        return (self // other, self % other) if isinstance(other, int) else NotImplemented

    def __rdivmod__(self, other):
        return (other // self, other % self) if isinstance(other, int) else NotImplemented

    def __abs__(self):
        return self if int.__int__(self) >= 0 else -self

    __hash__ = int.__hash__

    def __reduce__(self):  # a copy or a pickle is a plain int
        return (int, (int.__int__(self),))

    def __repr__(self) -> str:
        return repr(int.__int__(self))

    __str__ = __repr__


for _name, _op in _COMPARE.items():
    setattr(Size, _name, _compare(_op))
for _op, _dunder in _DUNDER.items():
    setattr(Size, f"__{_dunder}__", _arith(_op, False))
    setattr(Size, f"__r{_dunder}__", _arith(_op, True))


_range = builtins.range


def _watched_range(*args):
    """``range`` while sizes are watched: C reads an int subclass's value without asking
    it (no ``__index__``), so the size used as a count is logged here."""
    plain_args = []
    for a in args:  # no comprehension: ``_number`` looks at the caller's frame
        plain_args.append(a._number("used as a Python int (range)") if isinstance(a, Size) else a)
    return _range(*plain_args)


@contextlib.contextmanager
def watching(log: SizeLog):
    """While a trace runs with ``log``: ``range`` of a size is a check too. (Indexing a
    Python list by a size reads its value in C unseen: it is covered only by chapter 9's
    comparison of programs traced at other sizes.)"""
    builtins.range = _watched_range
    try:
        yield log
    finally:
        builtins.range = _range


def plain(x):
    """``x`` with every Size an int (op attributes: kernels and caches want plain ints)."""
    if isinstance(x, Size):
        return int.__int__(x)
    if type(x) in (tuple, list):
        return type(x)(plain(v) for v in x)
    if type(x) is dict:
        return {k: plain(v) for k, v in x.items()}
    return x


def evaluate(expr: tuple, dim) -> int:
    """The value of ``expr`` where ``dim(k, d)`` is dim ``d`` of node ``k``."""
    kind = expr[0]
    if kind == "dim":
        return dim(expr[1], expr[2])
    if kind == "const":
        return expr[1]
    return _ARITH[kind](evaluate(expr[1], dim), evaluate(expr[2], dim))


def describe(expr: tuple, name) -> str:
    """``expr`` as Python, ``name(k, d)`` naming a dim (``x.shape[0]``)."""
    kind = expr[0]
    if kind == "dim":
        return name(expr[1], expr[2])
    if kind == "const":
        return repr(expr[1])
    return f"({describe(expr[1], name)} {kind} {describe(expr[2], name)})"


def nodes_used(checks: list[tuple]) -> set[int]:
    """The node indices the checks read."""
    out: set[int] = set()

    def walk(e):
        if e[0] == "dim":
            out.add(e[1])
        elif e[0] != "const":
            walk(e[1])
            walk(e[2])

    for _, a, b, _, _ in checks:
        walk(a)
        walk(b)
    return out


def failures(checks: list[tuple], dim, name) -> list[str]:
    """Why sizes given by ``dim(k, d)`` would not take the decisions ``checks`` logged."""
    out = []
    for op, a, b, result, kind in checks:
        now = _TEST[op](evaluate(a, dim), evaluate(b, dim))
        if now == result:
            continue
        left = describe(a, name)
        if kind != "compare":  # a size used as a number: it was specialised
            out.append(f"{left} {kind} was {b[1]} when traced and is {evaluate(a, dim)} now")
        else:
            test = f"{left} {op} {describe(b, name)}"
            out.append(
                f"{test} was {result} when traced and is {now} now "
                f"({left} = {evaluate(a, dim)}); a Python branch on the size"
            )
    return list(dict.fromkeys(out))


def text(check: tuple, name) -> str:
    op, a, b, result, kind = check
    if kind != "compare":
        return f"{describe(a, name)} == {b[1]} ({kind})"
    return f"{describe(a, name)} {op} {describe(b, name)} is {result}"
