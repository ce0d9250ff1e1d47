"""What a traced function reads besides its arguments, and the guards that keep it honest.

Before tracing, jit walks what the function can reach: the globals its code names,
its closure cells, ``self`` for a method or a module, and (recursively) the user
functions, modules, dataclasses and containers found there. Every value gets a
*path* from the function (``self.layers[0].weight``, ``global scale``), so that the
same value can be read again on the next call, from the function object of that call:

* a tensor found this way becomes a **graph input** when the trace uses it (fed from
  its path on every call), so rebinding a global tensor or an optimizer step on a
  parameter is seen without retracing; its shape, dtype, device and
  ``requires_grad`` are guarded;
* a Python value (number, string, tuple, a user function) is **guarded**: jit
  records it after the trace and checks it on every call; a change retraces, with
  the path and both values as the reason.

Walking the state before and after the trace also shows the trace's side effects
(a list that grew, an attribute that changed): they ran once, at trace time.
"""

from __future__ import annotations

import dataclasses
import dis
import struct
import sys
import types

import numpy as np

from ..core.tensor import Tensor
from .tracer import Proxy

_LIBRARIES = {"minitorch", "numpy", "numba", "builtins", "hypothesis", "pytest", "_pytest"}
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_EXACT = {t.__name__: t for t in (bool, int, str, bytes)}  # equal values are equal bits
_MAX_DEPTH, _MAX_ITEMS = 8, 2000


class FloatBits:
    """A float in a cache key, equal to another only with the same bits (-0.0, NaN)."""

    __slots__ = ("value", "bits")

    def __init__(self, value: float):
        self.value, self.bits = value, struct.pack("<d", value)

    def __eq__(self, other) -> bool:
        return isinstance(other, FloatBits) and self.bits == other.bits

    def __hash__(self) -> int:
        return hash(self.bits)

    def __repr__(self) -> str:
        return repr(self.value)


def by_bits(key):
    """``key`` with every float replaced by its :class:`FloatBits` (nested tuples too)."""
    if isinstance(key, float):
        return FloatBits(key)
    if isinstance(key, tuple):  # a call per nested tuple or float, not per item (every call's key)
        if _floatless(key):  # tensors' shapes, dtypes and devices: the key as it is
            return key
        return tuple([by_bits(k) if isinstance(k, (tuple, float)) else k for k in key])
    return key


_PLAIN = (int, str, bool, type(None))


def _floatless(key: tuple) -> bool:
    """No float at any depth: only ints, strings, bools and None (exact types)."""
    for k in key:
        if type(k) is tuple:
            if not _floatless(k):
                return False
        elif type(k) not in _PLAIN:
            return False
    return True


def value_key(v):
    """A hashable, bit-exact description of a guarded Python value."""
    if isinstance(v, float):
        return ("float", FloatBits(v))
    if isinstance(v, complex):
        return ("complex", FloatBits(v.real), FloatBits(v.imag))
    if isinstance(v, tuple):
        return (type(v).__name__, tuple(value_key(x) for x in v))
    return (type(v).__name__, v)


def show(key) -> str:
    """The value a :func:`value_key` describes, for messages."""
    kind, body = key[0], key[1]
    if kind == "float":
        return repr(body)
    if isinstance(body, tuple):
        return "(" + ", ".join(show(k) for k in body) + ("," if len(body) == 1 else "") + ")"
    return repr(body)


def _library(obj) -> bool:
    mod = getattr(obj, "__module__", None) or type(obj).__module__ or ""
    top = mod.split(".")[0]
    return top in _LIBRARIES or top in sys.stdlib_module_names


_GLOBAL_READS = {"LOAD_GLOBAL", "LOAD_NAME"}


def _names(code: types.CodeType) -> set[str]:
    """The global names ``code`` (and the functions defined in it) read.

    Not ``co_names``: it also holds attribute names, so ``opt.step()`` would make a
    global called ``step`` part of the guard.
    """
    names = {i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_READS}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names(c)
    return names


# ---------------------------------------------------------------- paths


def resolve(root, path: tuple):
    """Follow ``path`` from ``root = (fn, args)``; LookupError when it leads nowhere now.

    A path starts at the function, or at an argument (``("arg", (i, name))``: an object
    passed in, such as a module, whose attributes the function reads).
    """
    x, args = root
    if path and path[0][0] == "arg":
        x, path = args[path[0][1][0]], path[1:]
    for kind, arg in path:
        try:
            if kind == "glob":
                x = x.__globals__[arg]
            elif kind == "cell":
                x = x.__closure__[x.__code__.co_freevars.index(arg)].cell_contents
            elif kind == "attr":
                x = vars(x)[arg]
            elif kind == "item":
                x = x[arg]
            elif kind == "self":
                x = x.__self__
            elif kind == "func":
                x = x.__func__
            elif kind == "method":
                x = getattr(type(x), arg)
            elif kind == "jit":
                x = x.fn
            elif kind == "impl":
                x = x.implementation()
            elif kind == "type":
                x = type(x)
            elif kind == "flag":  # an attribute its class may hold (Module.training)
                x = getattr(x, arg)
        except (KeyError, IndexError, AttributeError, ValueError, TypeError) as e:
            raise LookupError(str(e)) from None
    return x


def resolver(root):
    """``resolve`` for many paths from one root, each shared prefix followed once (every
    parameter of a module reached through a closure shares the way to the module)."""
    memo: dict = {}
    args = root[1]

    def get(path: tuple):
        x = memo.get(path, _GONE)
        if x is _GONE:
            x = resolve(root, path) if len(path) < 2 else resolve((get(path[:-1]), args), path[-1:])
            memo[path] = x
        return x

    return get


_GONE = object()


def path_name(path: tuple) -> str:
    out = ""
    for kind, arg in path:
        if kind in ("glob", "cell"):
            word = "global" if kind == "glob" else "closure"
            out = f"{word} {arg}" if not out else f"{out} -> {word} {arg}"
        elif kind in ("attr", "flag"):  # from the root: the jitted object itself (a module)
            out = f"{out or 'self'}.{arg}"
        elif kind == "item":
            out = f"{out}[{arg!r}]"
        elif kind == "self":
            out = "self" if not out else f"{out}.__self__"
        elif kind == "arg":
            out = arg[1]  # (position, name)
        elif kind == "type":
            out = f"type({out or 'self'})"
        elif kind == "impl":  # an exercise: the learner's code or the reference
            out = f"the implementation of {out or 'the function'}"
    return out or "the function"


# ---------------------------------------------------------------- the walk


@dataclasses.dataclass
class State:
    """What a walk found: tensors by id, guarded values and (for side effects) sizes."""

    tensors: dict[int, tuple] = dataclasses.field(default_factory=dict)  # id -> (path, name, t)
    values: dict[tuple, tuple] = dataclasses.field(default_factory=dict)  # path -> key
    idents: dict[tuple, object] = dataclasses.field(default_factory=dict)  # path -> function
    sizes: dict[tuple, int] = dataclasses.field(default_factory=dict)  # path -> len (lists)


def scan(fn, args=(), names=()) -> State:
    """Walk everything ``fn`` can reach besides its tensor and scalar arguments.

    Objects passed as arguments (a module, a config) are walked too: ``args`` are the
    argument values and ``names`` their names, for messages.
    """
    state, seen, count = State(), set(), [0]

    def walk(x, path, depth):
        count[0] += 1
        if count[0] > _MAX_ITEMS or depth > _MAX_DEPTH:  # bounded: deeper state is not guarded
            return
        if isinstance(x, Tensor):
            if not isinstance(x, Proxy) and id(x) not in state.tensors:
                state.tensors[id(x)] = (path, path_name(path), x)
            return
        if isinstance(x, _SCALARS) or (
            isinstance(x, tuple) and all(isinstance(v, _SCALARS) for v in x)
        ):
            state.values[path] = value_key(x)
            return
        if id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, (tuple, list, dict)):
            state.sizes[path] = len(x)
            items = x.items() if isinstance(x, dict) else enumerate(x)
            for k, v in list(items):
                if isinstance(k, (str, int)):
                    walk(v, path + (("item", k),), depth + 1)
        elif isinstance(x, types.FunctionType) and not _library(x):
            state.idents[path] = x
            walk_function(x, path, depth)
        elif isinstance(x, types.MethodType):
            walk(x.__self__, path + (("self", None),), depth + 1)
        elif type(x).__name__ == "JitFunction":
            walk(x.fn, path + (("jit", None),), depth + 1)
        elif isinstance(x, (types.ModuleType, type)):
            return
        elif _is_optimizer(x):  # its state and step count are the step's inputs (chapter 9)
            state.idents[path] = x
        elif hasattr(x, "__dict__") and (
            not _library(x) or _is_module(x) or dataclasses.is_dataclass(x)
        ):
            # its class too: a layer swapped for another one with no state (ReLU -> Tanh)
            state.idents[path + (("type", None),)] = type(x)
            if _is_module(x):  # eval() sets what the class held until then
                state.values[path + (("flag", "training"),)] = value_key(x.training)
            for k, v in list(vars(x).items()):
                if not k.startswith("__"):
                    walk(v, path + (("attr", k),), depth + 1)
        else:  # a library object (a numpy array, an op, a builtin): the same object or retrace
            state.idents[path] = x

    def walk_function(f, path, depth):
        if hasattr(f, "exercise_id"):  # an exercise's dispatcher: guard what it calls now
            # (the learner's or the reference, a setting), not the cache that choice fills
            walk(f.implementation(), path + (("impl", None),), depth + 1)
            return
        g = f.__globals__
        for name in sorted(_names(f.__code__)):
            if name in g:
                walk(g[name], path + (("glob", name),), depth + 1)
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                continue
            walk(value, path + (("cell", name),), depth + 1)

    for i, (v, name) in enumerate(zip(args, names)):
        if not isinstance(v, (Tensor, *_SCALARS, tuple, list, dict, types.FunctionType)):
            walk(v, (("arg", (i, name)),), 0)
    if isinstance(fn, types.MethodType):
        walk(fn.__self__, (("self", None),), 0)
        seen.add(id(fn.__func__))
        walk_function(fn.__func__, (("func", None),), 0)
    elif isinstance(fn, types.FunctionType):
        seen.add(id(fn))
        walk_function(fn, (), 0)
    else:  # a callable object (an nn.Module): its attributes, then its forward/__call__
        walk(fn, (), 0)
        meth = "forward" if _is_module(fn) else "__call__"
        f = getattr(type(fn), meth, None)
        if isinstance(f, types.FunctionType):
            walk_function(f, (("method", meth),), 0)
    return state


def _is_optimizer(x) -> bool:
    from ..nn.optim import Optimizer

    return isinstance(x, Optimizer)


def _is_module(x) -> bool:
    from ..nn.module import Module

    return isinstance(x, Module)


def side_effects(before: State, after: State) -> list[str]:
    """What the trace changed in the state it can reach (it ran once, at trace time)."""
    out, grown = [], set()
    for path, n in after.sizes.items():
        old = before.sizes.get(path)
        if old is not None and old != n:
            out.append(f"{path_name(path)} changed size from {old} to {n}")
            grown.add(path)
    for path, key in after.values.items():
        old = before.values.get(path)
        if old is None and path not in before.values:
            if path[:-1] in grown:  # an item appended: said above
                continue
            out.append(f"{path_name(path)} was set to {show(key)}")
        elif old != key:
            out.append(f"{path_name(path)} changed from {show(old)} to {show(key)}")
    return out


_DTYPE_NAMES: dict = {}  # numpy computes ``dtype.name`` anew on every read


def tensor_guard(t) -> tuple:
    dtype = t.dtype
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return (tuple(t.shape), name, t.device, bool(t.requires_grad))


def check(root, values: dict, sizes: dict, idents: dict, tensors: list) -> list[str]:
    """Why the state read from ``root`` differs from what a trace recorded ([] if it does not)."""
    reasons = []
    get = resolver(root)  # each shared prefix of the paths followed once
    for path, key in values.items():
        try:
            now = get(path)
        except LookupError:
            reasons.append(f"{path_name(path)} is gone")
            continue
        if isinstance(now, Tensor) or not isinstance(now, (*_SCALARS, tuple)):
            reasons.append(f"{path_name(path)} is no longer a {key[0]}")
            continue
        new = value_key(now)
        if new != key:
            if new[0] != key[0]:
                reasons.append(f"{path_name(path)} changed type from {key[0]} to {new[0]}")
            else:
                reasons.append(f"{path_name(path)} changed from {show(key)} to {show(new)}")
    for path, n in sizes.items():
        try:
            now = len(get(path))
        except (LookupError, TypeError):
            reasons.append(f"{path_name(path)} is gone")
            continue
        if now != n:
            reasons.append(f"{path_name(path)} changed size from {n} to {now}")
    for path, obj in idents.items():
        try:
            now = get(path)
            if now is obj:
                continue
            if path[-1][0] == "type":
                where = path_name(path[:-1])
                reasons.append(f"{where} changed class from {obj.__name__} to {now.__name__}")
            else:
                reasons.append(f"{path_name(path)} is a different object")
        except LookupError:
            reasons.append(f"{path_name(path)} is gone")
    for path, g in tensors:
        try:
            t = get(path)
        except LookupError:
            reasons.append(f"{path_name(path)} is gone")
            continue
        if not isinstance(t, Tensor):
            reasons.append(f"{path_name(path)} is no longer a tensor")
            continue
        now = tensor_guard(t)
        if now == g:
            continue
        for what, old, new in zip(("shape", "dtype", "device", "requires_grad"), g, now):
            if old != new:
                reasons.append(f"{path_name(path)}.{what} changed from {old!r} to {new!r}")
    return reasons


# ---------------------------------------------------------------- the guards as code
# ``check`` walks every path and builds reasons; on the hot path (a decode step called
# once per token) only the verdict matters. So each trace turns its guards into one
# straight-line function, built once: every shared prefix read into a local, every
# guard one comparison. It answers True or False; False sends the call to ``check``,
# which says why (the same predicates, so the two cannot disagree on a verdict).

_STEPS = {
    "glob": "{x}.__globals__[{a}]",
    "cell": "{x}.__closure__[{x}.__code__.co_freevars.index({a})].cell_contents",
    "attr": "{x}.__dict__[{a}]",  # vars(x)[a], without the call
    "item": "{x}[{a}]",
    "self": "{x}.__self__",
    "func": "{x}.__func__",
    "method": "getattr(type({x}), {a})",
    "jit": "{x}.fn",
    "impl": "{x}.implementation()",
    "type": "type({x})",
    "flag": "getattr({x}, {a})",
}


class _Emitter:
    """Lines that read paths from ``(fn, args)`` into locals, each prefix once."""

    def __init__(self):
        self.lines: list[str] = []
        self.consts: dict = {}
        self.local: dict = {}

    def const(self, value) -> str:
        name = f"c{len(self.consts)}"
        self.consts[name] = value
        return name

    def read(self, path: tuple) -> str:
        if path in self.local:
            return self.local[path]
        if not path:
            return "fn"
        if len(path) == 1 and path[0][0] == "arg":
            x = f"args[{int(path[0][1][0])}]"
        else:
            parent = self.read(path[:-1])
            kind, arg = path[-1]
            form = _STEPS.get(kind)
            if form is None:  # ``resolve`` passes an unknown step by
                return parent
            x = form.format(x=parent, a=self.const(arg) if "{a}" in form else "")
        name = f"v{len(self.local)}"
        self.lines.append(f"{name} = {x}")
        self.local[path] = name
        return name

    def build(self, body: list[str], result: str, failed: str, name: str):
        """``def name(fn, args)``: the reads and ``body``, then ``result``; ``failed`` when a
        read raises (the slow path then says why)."""
        src = [f"def {name}(fn, args):", "    try:"]
        src += [f"        {line}" for line in self.lines + body + ["pass"]]
        src += ["    except Exception:", f"        return {failed}", f"    return {result}"]
        scope = {"Tensor": Tensor, "tensor_guard": tensor_guard, "_fits": _fits, **self.consts}
        exec(compile("\n".join(src), f"<minitorch {name}>", "exec"), scope)  # noqa: S102
        scope[name].source = "\n".join(src)  # to read (``entry._guard.source``)
        return scope[name]


def _fits(now, key) -> bool:
    """``check``'s test of a guarded Python value, as a verdict."""
    if isinstance(now, Tensor) or not isinstance(now, (*_SCALARS, tuple)):
        return False
    return value_key(now) == key


def compile_check(values: dict, sizes: dict, idents: dict, tensors: list):
    """``check`` as a function ``(fn, args) -> bool``: True when ``check`` would return []."""
    e, body = _Emitter(), []
    for path, key in values.items():
        x = e.read(path)
        if key[0] in _EXACT:  # compared inline: ``_fits``'s answer for these types, faster
            body.append(f"if type({x}) is not {e.const(_EXACT[key[0]])} or {x} != "
                        f"{e.const(key[1])}: return False")  # fmt: skip
        else:
            body.append(f"if not _fits({x}, {e.const(key)}): return False")
    for path, n in sizes.items():
        body.append(f"if len({e.read(path)}) != {int(n)}: return False")
    for path, obj in idents.items():
        body.append(f"if {e.read(path)} is not {e.const(obj)}: return False")
    seen = e.const([None] * len(tensors))  # each tensor's data when it last passed
    for k, (path, (shape, dtype, device, grad)) in enumerate(tensors):  # ``tensor_guard``
        t, d = e.read(path), f"d{len(body)}"
        shape, dtype = e.const(tuple(shape)), e.const(np.dtype(dtype))
        body.append(f"if not isinstance({t}, Tensor): return False")
        body.append(f"{d} = {t}._data")
        # a parameter holds the same data on every call: its shape and dtype were checked
        body.append(f"if {d} is not {seen}[{k}]:")
        body.append(f"    if {d}.shape != {shape} and tuple({d}.shape) != {shape}: return False")
        body.append(f"    if {d}.dtype != {dtype}: return False")
        body.append(f"    {seen}[{k}] = {d}")
        body.append(f"if {t}.device != {e.const(device)}: return False")
        body.append(f"if {t}._requires_grad is not {bool(grad)}: return False")  # a bool
    return e.build(body, "True", "False", "guard")


def compile_reader(feeds: list):
    """The graph's inputs from ``(fn, args)``: an ``int`` feed is an argument, a tuple a
    path; returns None when a path leads nowhere (the caller then asks ``resolve``)."""
    e = _Emitter()
    items = [f"args[{int(f)}]" if isinstance(f, int) else e.read(f) for f in feeds]
    return e.build([], "[" + ", ".join(items) + "]", "None", "feeds")
