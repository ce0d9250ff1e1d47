"""``minitorch.jit``: trace on the first call per input signature, run the cached graph after.

The cache key (exercise 5.7) describes every argument: a tensor by its shape,
dtype and device, anything else by its value (non-tensor arguments are
*static*: baked into the graph). When a key misses the cache but an older one
exists, the function is traced again and :func:`guard_failures` says why. After ``cache_limit`` (8) signatures the function runs eagerly, with
one warning.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import os
import textwrap
import types
import warnings
from dataclasses import dataclass, field

from ..core import creation
from ..core.errors import OpError
from ..core.tensor import Tensor, is_grad_enabled
from ..exercises import exercise
from ..nn.module import Module
from . import guards
from .graph import Graph, _unflatten
from .tracer import Break, GraphBreakError, Proxy, Tracer, flatten_output, tracing

log = logging.getLogger("minitorch.jit")


@exercise("5.7")
def cache_key(args: tuple) -> tuple:
    """A hashable description of ``args`` that decides whether a cached graph fits.

    One entry per argument:

    * a Tensor -> ``("tensor", shape, dtype_name, device)``, e.g.
      ``("tensor", (2, 3), "float32", "cpu")`` (values do not matter);
    * anything else is static -> ``("static", type_name, value)`` with lists
      turned into tuples (recursively) so that the key is hashable, e.g.
      ``("static", "list", (1, 2))``. ``True`` and ``1`` differ by type name.
    * a Tensor inside a list/tuple, or a value that cannot be hashed, raises
      ``OpError("jit", problem, hint)`` naming the argument's position.

    Example:
        >>> cache_key((minitorch.ones(2, 3), 0.5))
        (('tensor', (2, 3), 'float32', 'cpu'), ('static', 'float', 0.5))

    Hint: ``hash(value)`` raises ``TypeError`` for unhashable values.
    """
    raise NotImplementedError("Exercise 5.7: cache_key")


def guard_failures(names: list[str], old: tuple, new: tuple) -> list[str]:
    """Why the cache key ``new`` does not match ``old``: one message per failed guard.

    ``names[i]`` is the name of argument ``i``. ``[]`` for equal keys.

    Example:
        >>> guard_failures(["x"], (("tensor", (2, 3), "float32", "cpu"),),
        ...                       (("tensor", (4, 3), "float32", "cpu"),))
        ['x.shape changed from (2, 3) to (4, 3)']
    """
    if len(old) != len(new):
        return [f"the number of arguments changed from {len(old)} to {len(new)}"]
    out = []
    for name, a, b in zip(names, old, new):
        if a == b:
            continue
        if a[0] == "tensor" and b[0] == "tensor":
            for field, x, y in zip(("shape", "dtype", "device"), a[1:], b[1:]):
                if x != y:
                    out.append(
                        f"{name}.{field} changed from {x if field != 'shape' else repr(x)}"
                        f" to {y if field != 'shape' else repr(y)}"
                    )
        elif a[0] == "static" and b[0] == "static":
            if a[1] != b[1]:
                out.append(f"{name} changed type from {a[1]} to {b[1]}")
            else:
                out.append(f"{name} changed from {a[2]!r} to {b[2]!r}")
        elif a[0] == "tensor":
            out.append(f"{name} changed from a tensor to a static {b[1]}")
        else:
            out.append(f"{name} changed from a static {a[1]} to a tensor")
    return out


# ---------------------------------------------------------------- argument binding


def _is_module(fn) -> bool:
    from ..nn.module import Module

    return isinstance(fn, Module)


class _Binder:
    """Flattens a call into named values (``*args``, ``**kwargs`` expanded) and rebuilds it."""

    def __init__(self, fn):
        target = fn.forward if _is_module(fn) else fn
        try:
            self.sig = inspect.signature(target)
        except (TypeError, ValueError):
            self.sig = None
        # positional parameters without defaults, then maybe ``*args``: a call without
        # keywords binds in order, without ``Signature.bind`` (7 us of a 200 us decode step)
        self.plain, self._names = None, {}
        if self.sig is not None:
            ps = list(self.sig.parameters.values())
            star = ps.pop() if ps and ps[-1].kind is inspect.Parameter.VAR_POSITIONAL else None
            kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            if all(p.kind in kinds and p.default is p.empty for p in ps):
                self.plain = ([p.name for p in ps], star.name if star else None)

    def _plain(self, args) -> list | None:
        """The names of a keyword-free call's values, when it binds in order (else None)."""
        names = self._names.get(len(args))
        if names is None:
            fixed, star = self.plain
            if len(args) < len(fixed) or (len(args) > len(fixed) and star is None):
                return None  # Signature.bind raises the usual TypeError
            extra = [f"{star}[{i}]" for i in range(len(args) - len(fixed))]
            names = self._names[len(args)] = fixed + extra
        return names

    def flatten(self, args, kwargs):
        if self.plain is not None and not kwargs:
            names = self._plain(args)
            if names is not None:
                return names, list(args), (len(args), [])
        if self.sig is None:
            keys = sorted(kwargs)
            names = [f"arg{i}" for i in range(len(args))] + keys
            return names, list(args) + [kwargs[k] for k in keys], (len(args), keys)
        bound = self.sig.bind(*args, **kwargs)
        bound.apply_defaults()
        names, values = [], []
        for p in self.sig.parameters.values():
            v = bound.arguments[p.name]
            if p.kind is p.VAR_POSITIONAL:
                names += [f"{p.name}[{i}]" for i in range(len(v))]
                values += list(v)
            elif p.kind is p.VAR_KEYWORD:  # one value per keyword, in sorted order
                names += sorted(v)
                values += [v[k] for k in sorted(v)]
            else:
                names.append(p.name)
                values.append(v)
        return names, values, bound

    def call(self, fn, values, bound):
        if not isinstance(bound, inspect.BoundArguments):
            n, keys = bound
            return fn(*values[:n], **dict(zip(keys, values[n:])))
        pos, kw, k = [], {}, 0
        for p in self.sig.parameters.values():
            if p.kind is p.VAR_POSITIONAL:
                n = len(bound.arguments[p.name])
                pos += values[k : k + n]
                k += n
            elif p.kind is p.VAR_KEYWORD:
                keys = sorted(bound.arguments[p.name])
                kw.update(zip(keys, values[k : k + len(keys)]))
                k += len(keys)
            elif p.kind is p.KEYWORD_ONLY:
                kw[p.name] = values[k]
                k += 1
            else:
                pos.append(values[k])
                k += 1
        return fn(*pos, **kw)


# ---------------------------------------------------------------- tracing one call


@dataclass
class Trace:
    """What one trace produced: the graphs, the breaks, the guards and the result of that call.

    ``feeds`` says where each graph input comes from on a call: an ``int`` is the
    position of an argument, a tuple is the path of a tensor read from the state
    (:mod:`.guards`). ``eager`` is set when the function must run in Python on
    every call (a graph break, random numbers).
    """

    graphs: list[Graph]
    breaks: list[Break]
    result: object = None
    compiled: object = None
    tensor_slots: list[int] = field(default_factory=list)
    feeds: list = field(default_factory=list)
    values: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=dict)
    idents: dict = field(default_factory=dict)
    tensors: list = field(default_factory=list)
    side_effects: list[str] = field(default_factory=list)
    pass_stats: list = field(default_factory=list)  # chapter 6
    eager: str | None = None
    _guard: object = field(default=None, repr=False, compare=False)
    _reader: object = field(default=None, repr=False, compare=False)

    @property
    def graph(self) -> Graph:
        return self.graphs[0]

    def check(self, fn, values: list, ctx=None) -> list[str]:
        """Why this trace does not fit the state ``fn`` reads now ([] if it fits)."""
        if self._guard is None:  # the guards as code, built on the first call (see guards)
            self._guard = guards.compile_check(self.values, self.sizes, self.idents, self.tensors)
        if self._guard(fn, values):
            return []
        return guards.check((fn, values), self.values, self.sizes, self.idents, self.tensors)

    def inputs(self, fn, values: list) -> list:
        if self._reader is None:
            self._reader = guards.compile_reader(self.feeds)
        out = self._reader(fn, values)
        if out is None:  # a path leads nowhere: resolve says where
            get = guards.resolver((fn, values))
            out = [values[f] if isinstance(f, int) else get(f) for f in self.feeds]
        return out


def _where(fn) -> str:
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        code = getattr(getattr(type(fn), "forward", None), "__code__", None)
    if code is None:
        return "?"
    file = "<cell>" if "ipykernel_" in code.co_filename else os.path.basename(code.co_filename)
    return f"{file}:{code.co_firstlineno}"


def trace_call(
    fn,
    binder,
    names,
    values,
    bound,
    fullgraph: bool,
    name: str,
    run=True,
    state=True,
    passes=None,
    debug=False,
    options=None,
    sizes=None,
) -> Trace:
    """Trace ``fn`` on concrete ``values``; breaks split the graph unless ``fullgraph``.

    With ``state`` the tensors ``fn`` reads from globals, closures and ``self`` become
    graph inputs and the Python values it can read are guarded (see :mod:`.guards`);
    without it (the staged ``trace()``) they are constants. With ``run`` the graph is
    also compiled and run on ``values`` (the result of this call). ``sizes``, a
    :class:`~.sizes.SizeLog`, logs the checks the call makes on sizes (chapter 9).
    """
    slots = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    before = guards.scan(fn, values, names) if state else None
    rng = creation._rng[0]
    rng_state = rng.bit_generator.state
    tracer = Tracer(name, fullgraph=fullgraph, concrete=[values[i] for i in slots], sizes=sizes)
    if before is not None:
        tracer.set_external(before.tensors)
        watched = dict(before.tensors)  # and the arguments: a Parameter passed in
        for i in slots:
            watched.setdefault(id(values[i]), ((), names[i], values[i]))
        old_data = {k: x[2]._data for k, x in watched.items()}
    with tracer:
        call_values = list(values)
        for i in slots:
            p = tracer.input(values[i].spec, names[i].replace("[", "").replace("]", ""))
            p.requires_grad = values[i].requires_grad
            call_values[i] = p
        result = binder.call(fn, call_values, bound)
        leaves, tree = flatten_output(tracer, result)
        if tracer.breaks:
            out = _unflatten(tree, [tracer.evaluate(n) for n in leaves])
            tracer.finish(leaves)
    t = Trace(tracer.graphs, list(tracer.breaks), None, None, slots)
    # Effects a graph cannot replay: random draws, in-place updates with untraced values.
    reason, hint, updated = None, "", []
    if creation._rng[0] is not rng or rng.bit_generator.state != rng_state:
        reason = "random numbers were drawn (rand/randn) while tracing; a graph would freeze them"
        hint = "pass random tensors in as arguments, or "
    elif state:
        updated = [x for k, x in watched.items() if x[2]._data is not old_data[k]]
        if updated:
            reason = (
                f"{', '.join(x[1] for x in updated)} was updated in place (assign_) while tracing"
            )
            for _, _, tensor in updated:  # undo, then run the call eagerly (below)
                tensor._data = old_data[id(tensor)]
    if reason is not None:
        if fullgraph:
            raise GraphBreakError(
                f"graph break in {name} ({_where(fn)}): {reason}. Hint: {hint}"
                "drop fullgraph=True to run the function eagerly"
            )
        t.eager = reason + ", so the function runs eagerly on every call"
        t.breaks.append(Break(t.eager, _where(fn)))
    if state:
        after = guards.scan(fn, values, names)
        t.values, t.sizes, t.idents = after.values, after.sizes, after.idents
        used = {}
        for node, path in tracer.state_inputs:
            used.setdefault(path, guards.tensor_guard(tracer._state_values[node]))
        t.tensors = list(used.items())
        for path, _, tensor in after.tensors.values():
            if path not in used:  # a constant of the graph (a cond branch read it): same object
                t.idents[path] = tensor
        t.side_effects = guards.side_effects(before, after)
    if state and updated:
        if run:
            t.result = binder.call(fn, list(values), bound)
        return t
    if tracer.breaks:
        t.result = out
        return t
    tracer.graph.set_outputs(leaves, tree)
    arg_nodes = dict(zip(tracer.graph.inputs, slots))
    state_nodes = dict(tracer.state_inputs)
    t.feeds = [arg_nodes[n] if n in arg_nodes else state_nodes[n] for n in tracer.graph.inputs]
    if run:
        t.compiled = tracer.graph.compile(passes=passes, debug=debug, options=options)
        t.result = t.compiled.run(*t.inputs(fn, values))
    return t


def _dump(graphs: list[Graph], debug: bool, tag: str) -> None:
    """Print (``debug``) and write (``MINITORCH_DUMP_GRAPH=<dir>``) every graph."""
    if debug:
        for g in graphs:
            print(g.text())
    folder = os.environ.get("MINITORCH_DUMP_GRAPH")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    for k, g in enumerate(graphs):
        base = os.path.join(folder, f"{tag}_{k}")
        with open(base + ".txt", "w", encoding="utf-8") as f:
            f.write(g.text() + "\n")
        with open(base + ".dot", "w", encoding="utf-8") as f:
            f.write(g.to_dot() + "\n")
        if debug:
            print(f"(written to {base}.txt and {base}.dot)")


class _Store:
    """The traces of one code object, shared by every ``jit`` of it (guards decide reuse)."""

    def __init__(self):
        self.entries: dict[tuple, list[Trace]] = {}
        self.trace_count = 0  # traces made for this code, by any JitFunction
        self.dynamic: list = []  # chapter 9: traces reused for every size of a dynamic dim

    def add(self, key, entry: Trace) -> None:
        bucket = self.entries.setdefault(key, [])
        bucket.append(entry)
        del bucket[:-16]  # many closures over one code object: keep the newest


_STORES: dict[tuple, _Store] = {}


def _store_for(fn, options) -> _Store:
    if isinstance(fn, types.MethodType):
        code, kind = getattr(fn.__func__, "__code__", None), "method"
    elif isinstance(fn, types.FunctionType):
        code, kind = fn.__code__, "function"
    else:
        f = getattr(type(fn), "forward" if _is_module(fn) else "__call__", None)
        code, kind = getattr(f, "__code__", None), type(fn)
    if code is None:
        return _Store()
    key = (code, kind, options)
    store = _STORES.get(key)
    if store is None:
        if len(_STORES) >= 4096:
            _STORES.pop(next(iter(_STORES)))
        store = _STORES[key] = _Store()
    return store


class JitFunction:
    """A function that is traced per input signature and then runs its cached graph."""

    def __init__(self, fn, fullgraph=False, debug=False, cache_limit=8, passes=None, options=None):
        functools.update_wrapper(self, fn, updated=())
        self.passes = passes  # chapter 6: None runs the default pipeline
        self.options = options  # chapters 7-9: a CompileOptions (None: passes only)
        self.fn, self.fullgraph, self.debug, self.cache_limit = fn, fullgraph, debug, cache_limit
        self._binder = _Binder(fn)
        self.store = _store_for(fn, (fullgraph, cache_limit, passes, options))
        self.recompiles: list[str] = []  # why each retrace happened
        self.trace_count = 0  # traces this object made (reused shared traces do not count)
        self.fell_back = False
        self._last_key = None
        self._warned: set[int] = set()
        self.dynamic_notes: list[str] = []  # chapter 9: which dims are dynamic (or not) and why

    @property
    def name(self) -> str:
        fn = self.fn
        name = getattr(fn, "__name__", None) or type(fn).__name__
        return name.replace("<lambda>", "lambda")

    @property
    def dynamic(self) -> list:
        """Chapter 9: this code's traces with dynamic dims (guards decide reuse, as above)."""
        return self.store.dynamic

    @property
    def cache(self) -> dict:
        """Every trace this function can reuse, by (argument key, number)."""
        return {(k, i): t for k, ts in self.store.entries.items() for i, t in enumerate(ts)}

    def _key(self, values, ctx=None) -> tuple:
        grads = tuple(bool(v.requires_grad) for v in values if isinstance(v, Tensor))
        return guards.by_bits(cache_key(tuple(values))), grads, is_grad_enabled()

    def _arg_reasons(self, names, key) -> list[str]:
        old = self._last_key
        if old is None:
            return []
        reasons = guard_failures(names, old[0], key[0])
        if old[2] != key[2]:
            mode = {True: "enabled", False: "disabled (no_grad)"}
            reasons.append(f"grad mode changed from {mode[old[2]]} to {mode[key[2]]}")
        if not reasons and len(old[1]) == len(key[1]):
            tnames = [names[k] for k, e in enumerate(key[0]) if e and e[0] == "tensor"]
            for n, a, b in zip(tnames, old[1], key[1]):
                if a != b:
                    reasons.append(f"{n}.requires_grad changed from {a} to {b}")
        return reasons

    # What a front end adds to jit (chapter 9's compiled step is one): the call's context
    # (None here), a key over it, how an entry runs and how a call is traced. Later
    # chapters hook in through ``DYNAMIC`` (dynamic dims), never by being imported here.

    def _context(self, values):
        return None

    def __call__(self, *args, **kwargs):
        names, values, bound = self._binder.flatten(args, kwargs)
        if tracing() and any(isinstance(v, Proxy) for v in values):
            return self.fn(*args, **kwargs)  # called inside another trace: inline it
        ctx = self._context(values)
        key = self._key(values, ctx)
        reasons: list[str] = []
        for entry in reversed(self.store.entries.get(key, [])):
            failed = entry.check(self.fn, values, ctx)
            if not failed:
                return self._run(entry, names, values, bound, args, kwargs, ctx)
            reasons = reasons or failed
        if self.dynamic and DYNAMIC:  # chapter 9: a graph traced with symbolic sizes
            entry, failed = DYNAMIC[0].find(self, values, key, ctx)
            if entry is not None:
                return DYNAMIC[0].run(self, entry, values, ctx)
            reasons = failed or reasons
        if self.fell_back:
            return self.fn(*args, **kwargs)
        if self.trace_count:
            if self.trace_count >= self.cache_limit:
                self.fell_back = True
                warnings.warn(
                    f"jit({self.name}): traced {self.trace_count} signatures (the cache limit); "
                    "new signatures now run eagerly. Hint: keep shapes fixed, or pass changing "
                    "numbers as tensors instead of Python values",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return self.fn(*args, **kwargs)
            reason = "; ".join(reasons or self._arg_reasons(names, key)) or "a new signature"
            if self.dynamic_notes and not self.dynamic:  # chapter 9: why a dim stayed static
                reason += " (" + "; ".join(self.dynamic_notes) + ")"
            self.recompiles.append(reason)
            log.info("jit(%s): retracing because %s", self.name, reason)
            if self.debug:
                print(f"jit({self.name}): retracing because {reason}")
        try:
            entry = self._trace(names, values, bound, key, ctx)
        except (AttributeError, TypeError) as e:
            lists = [f"{n} (a {type(v).__name__})" for n, v in zip(names, values)
                     if isinstance(v, (list, tuple)) and v and not isinstance(v[0], Tensor)]  # fmt: skip
            if not lists:
                raise
            raise OpError(
                self.name,
                f"tracing failed ({type(e).__name__}: {e}); {', '.join(lists)} is a static "
                "Python value, baked into the graph",
                hint="pass numbers the step computes with as a tensor: minitorch.tensor([...])",
            ) from e
        self.store.add(key, entry)
        if DYNAMIC:  # chapter 9: mark_dynamic, automatic dynamic dims
            DYNAMIC[0].after_trace(self, names, values, bound, key, self._last_key, entry, ctx)
        self._last_key = key
        return entry.result

    def _run(self, entry: Trace, names, values, bound, args, kwargs, ctx=None):
        if entry.eager is not None:
            return self.fn(*args, **kwargs)  # e.g. random numbers: Python draws them
        if entry.compiled is None:
            return self._trace(names, values, bound, None).result  # breaks: Python runs
        inputs = entry.inputs(self.fn, values)
        if not is_grad_enabled():  # nothing records; the key and guards held every spec
            return entry.compiled.run_checked(inputs)
        return entry.compiled.run(*inputs)

    def _trace(self, names, values, bound, key, ctx=None) -> Trace:
        t = trace_call(
            self.fn,
            self._binder,
            names,
            values,
            bound,
            self.fullgraph,
            self.name,
            passes=self.passes,
            debug=self.debug,
            options=self.options,
        )
        if key is not None:
            self.trace_count += 1
            self.store.trace_count += 1
            _dump(t.graphs, self.debug, self._tag(key))
            self._warn_side_effects(t.side_effects)
        return t

    def _warn_side_effects(self, effects: list[str], entry: str = "jit") -> None:
        if effects:
            warnings.warn(
                f"{entry}({self.name}): while tracing, the function changed Python state: "
                + "; ".join(effects)
                + ". Such side effects run once, when tracing, not on every call",
                RuntimeWarning,
                stacklevel=4,
            )

    def _tag(self, key) -> str:
        """A file name unique per function (code location) and signature."""
        digest = hashlib.sha1(f"{_where(self.fn)}|{self.name}|{key!r}".encode()).hexdigest()
        return f"{self.name}_{digest[:10]}"

    def trace(self, *args, **kwargs) -> Graph:
        """The staged form: trace on example inputs and return the (single) graph.

        Tensors read from globals, closures or ``self`` are constants of this graph.
        """
        names, values, bound = self._binder.flatten(args, kwargs)
        t = trace_call(
            self.fn, self._binder, names, values, bound, True, self.name, run=False, state=False
        )
        _dump(t.graphs, self.debug, f"{self._tag(self._key(values))}_staged")
        return t.graph

    @property
    def graphs(self) -> list[Graph]:
        """Every graph in the cache, oldest first."""
        return [g for t in self.cache.values() for g in t.graphs]

    def __get__(self, obj, objtype=None):
        """``@jit`` on a method: ``obj.method`` is the jitted bound method."""
        if obj is None:
            return self
        return jit(
            types.MethodType(self.fn, obj),
            fullgraph=self.fullgraph,
            debug=self.debug,
            cache_limit=self.cache_limit,
            passes=self.passes,
            options=self.options,
        )

    def __repr__(self) -> str:
        return f"<jit {self.name}: {len(self.cache)} cached signature(s)>"


def check_arguments(entry: str, fn, **flags) -> None:
    """What every front end checks before it traces: a callable, bools, a positive limit."""
    if isinstance(fn, type):  # a class is callable, but calling it builds an object
        hint = f"{entry}(step) or @minitorch.{entry} on a def"
        if issubclass(fn, Module):
            name = ("nn." if fn.__module__.startswith("minitorch.nn") else "") + fn.__name__
            hint = f"instantiate it: {entry}({name}(...))"
        raise OpError(entry, f"expects a function or a module instance, got the class {fn.__name__}",
                      hint=hint)  # fmt: skip
    if not callable(fn) or isinstance(fn, Tensor):
        raise OpError(
            entry,
            f"expects a function, a method or an nn.Module, got {type(fn).__name__} {fn!r:.60}",
            hint=f"{entry}(step) or @minitorch.{entry} on a def",
        )
    for name, v in flags.items():
        if name == "cache_limit":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise OpError(entry, f"cache_limit must be an int >= 1, got {v!r}", hint="8")
        elif not isinstance(v, bool):
            raise OpError(entry, f"{name} must be True or False, got {v!r}")


# One JitFunction per (function, options), kept on the function itself (so it dies
# with it), so that ``minitorch.jit(step)(x)`` inside an eager loop is one object. A new
# function object of the same code (a lambda made in a loop, ``model.forward`` taken
# again) gets a new JitFunction that shares the traces of that code; the guards decide.
_ATTR = "__minitorch_jit__"


def jit(fn=None, *, fullgraph=False, debug=False, cache_limit=8, passes=None, options=None):
    """Trace ``fn`` into a graph on first call per signature; run the cached graph afterwards.

    ``@minitorch.jit``, ``@minitorch.jit(fullgraph=True)`` and ``minitorch.jit(fn)(x)``
    all work, on functions, methods and ``nn.Module`` instances; calling
    ``minitorch.jit`` again on the same function with the same options returns the
    same object. ``debug=True`` prints every graph; ``MINITORCH_DUMP_GRAPH=<dir>``
    also writes each as text and DOT. ``passes`` chooses the graph passes
    (chapter 6; None: the default pipeline); ``options``, a
    :class:`~minitorch.passes.CompileOptions`, the later stages (chapters 7-9).
    """
    if fn is None:
        return lambda f: jit(
            f,
            fullgraph=fullgraph,
            debug=debug,
            cache_limit=cache_limit,
            passes=passes,
            options=options,
        )
    check_arguments("jit", fn, fullgraph=fullgraph, debug=debug, cache_limit=cache_limit)
    if options is not None and type(options).__name__ != "CompileOptions":
        raise OpError(
            "jit",
            f"options must be a CompileOptions, got {type(options).__name__} {options!r}",
            hint="jit(fn, options=minitorch.CompileOptions(fuse=True))",
        )
    passes = None if passes is None else tuple(passes)
    if isinstance(fn, JitFunction):
        fn = fn.fn
    key = (fullgraph, debug, cache_limit, passes, options)
    per_fn = None
    if isinstance(fn, types.FunctionType):
        per_fn = fn.__dict__.setdefault(_ATTR, {})
    jf = per_fn.get(key) if per_fn is not None else None
    if jf is None:
        jf = JitFunction(fn, *key)
        if per_fn is not None:
            per_fn[key] = jf
    return jf


@dataclass
class ExplainOutput:
    graph_count: int
    graph_break_count: int
    break_reasons: list[Break]
    graphs: list[Graph]
    out: object = None
    side_effects: list[str] = field(default_factory=list)
    fusion: object = None  # chapter 7: a FusionReport when options.fuse
    dynamic: list[str] = field(default_factory=list)  # chapter 9: dynamic dims and why
    stage_lines: list[str] = field(default_factory=list)  # the compiler's stages, in order
    pass_stats: list = field(default_factory=list)  # chapter 6

    @property
    def op_count(self) -> int:
        return sum(len(g) for g in self.graphs)

    def __str__(self) -> str:
        lines = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.graph_break_count}",
            f"Op count: {self.op_count}",
        ]
        for g in self.graphs:
            ops = textwrap.wrap(" ".join(g.op_names()), 76)  # a long graph stays readable
            lines.append(f"  {g.name}: {len(g)} ops: {ops[0] if ops else ''}")
            lines += [f"    {line}" for line in ops[1:]]
        if self.break_reasons:
            lines.append("Break reasons:")
            lines += [f"  {k + 1}. {b}" for k, b in enumerate(self.break_reasons)]
        if self.pass_stats:
            lines.append("Passes:")
            lines += [f"  {s}" for s in self.pass_stats]
        lines += self.stage_lines  # what each stage of the compiler says (chapters 7-9)
        if self.dynamic:
            lines.append("Dynamic dims:")
            lines += [f"  {s}" for s in self.dynamic]
        if self.side_effects:
            lines.append("Side effects (they ran once, while tracing, not on every call):")
            lines += [f"  - {s}" for s in self.side_effects]
        return "\n".join(wrap_report(lines))


def wrap_report(lines: list[str], width: int = 96) -> list[str]:
    """Report lines folded at ``width``, continuations indented under their line, so that
    a long refusal or guard reason is read in a terminal or a book page without scrolling."""
    out = []
    for line in lines:
        for part in line.split("\n"):
            if len(part) <= width:
                out.append(part)
                continue
            pad = " " * (len(part) - len(part.lstrip()) + 4)
            out += textwrap.wrap(part, width, subsequent_indent=pad, break_on_hyphens=False)
    return out


# The compiler (chapter 6's pipeline) puts ``explain_lines(compiled) -> list[str]`` here.
EXPLAIN_HOOKS: list = []
# Chapter 9's dynamic dims install themselves here (``find``, ``run``, ``after_trace``,
# ``explain_lines``): the tracer imports nothing from a later chapter.
DYNAMIC: list = []


def explain(fn, options=None):
    """``explain(fn)(*inputs)``: trace once, print and return graphs, breaks and side effects.

    ``options`` (default: those of a jitted ``fn``) turns on later stages, which add
    their lines: fused groups and every refusal's reason (chapter 7).
    """
    if hasattr(fn, "explain_call"):  # a compiled training step (chapter 9) explains itself
        return fn.explain_call
    inner = fn.fn if isinstance(fn, JitFunction) else fn
    if options is None and isinstance(fn, JitFunction):
        options = fn.options
    binder = _Binder(inner)
    name = JitFunction.name.fget(types.SimpleNamespace(fn=inner))

    def run(*args, **kwargs) -> ExplainOutput:
        names, values, bound = binder.flatten(args, kwargs)
        t = trace_call(inner, binder, names, values, bound, False, name, options=options)
        graphs = [g for g in t.graphs if len(g)]
        out = ExplainOutput(
            len(graphs), len(t.breaks), list(t.breaks), graphs, t.result, list(t.side_effects)
        )
        out.pass_stats = list(getattr(t.compiled, "stats", []))
        out.fusion = getattr(t.compiled, "fusion", None)
        if t.compiled is not None:
            out.stage_lines = [line for hook in EXPLAIN_HOOKS for line in hook(t.compiled)]
        if DYNAMIC:  # chapter 9
            out.dynamic = DYNAMIC[0].explain_lines(fn, names, values, bound, t)
        print(out)
        return out

    return run
