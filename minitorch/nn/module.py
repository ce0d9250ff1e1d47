"""Chapter 2, exercise 2.11: modules and parameters.

A :class:`Module` is a plain Python object whose attributes hold its
:class:`Parameter` s and its sub-modules (also in lists, tuples and dicts).
Nothing is registered by hand: parameters are *discovered* by walking the
attributes (:func:`find_parameters`), which is what ``parameters()``,
``named_parameters()``, ``zero_grad()`` and the optimizers use.
"""

from __future__ import annotations

import math
import weakref
from typing import Callable, Iterator

import numpy as np

from ..core import dtypes as dt
from ..core.errors import OpError
from ..core.tensor import Tensor
from ..exercises import exercise, implementation


class Parameter(Tensor):
    """A leaf tensor that a module trains: ``requires_grad`` is always on.

    Optimizers update it in place with :meth:`assign_` (under ``no_grad``),
    so the module keeps the same object.
    """

    def __init__(self, data, dtype=None, device: str = "cpu"):
        if isinstance(data, Tensor):
            dtype = data.dtype if dtype is None else dtype
            data = data.numpy()
        super().__init__(data, dtype=dtype, requires_grad=True, device=device)

    def assign_(self, value: Tensor) -> Parameter:
        """Replace the values (same shape) without making a new object or a graph node."""
        if value.shape != self.shape:
            raise OpError(
                "assign_",
                f"a parameter of shape {self.shape} cannot take values of shape {value.shape}",
                hint="to change a layer's size, build a new Parameter (and a new optimizer)",
            )
        if value.dtype != self.dtype:
            value = value.astype(self.dtype)
        self._data = value.contiguous()._data
        return self

    def register_grad_hook(self, fn) -> Callable[[], None]:
        """Call ``fn(grad)`` during each ``backward`` once this parameter's gradient is final.

        ``grad`` is what that backward adds to ``.grad`` (in the parameter's dtype), passed as
        soon as every op that used the parameter has had its rule run, while the rest of the
        graph is still being walked: chapter 12 starts sending it then. Returns ``remove()``.
        """
        if not callable(fn):
            raise OpError("register_grad_hook", f"fn is a {type(fn).__name__}, not callable",
                          hint="pass a function of one argument, the gradient")  # fmt: skip
        hooks = self.__dict__.setdefault("_grad_hooks", [])
        hooks.append(fn)

        def remove() -> None:
            if fn in hooks:
                hooks.remove(fn)

        return remove

    def __repr__(self) -> str:
        return "Parameter(" + super().__repr__() + ")"


@exercise("2.11")
def find_parameters(obj, prefix: str = "") -> list[tuple[str, Parameter]]:
    """Every :class:`Parameter` reachable from ``obj``, as ``(dotted name, parameter)`` pairs.

    Walk recursively:

    * a ``Parameter`` is found under the current name;
    * a ``Module``: visit each attribute in ``vars(module)`` (insertion order)
      whose name does not start with ``_``, under ``name.attribute``;
    * a ``list`` or ``tuple``: visit each item under ``name.0``, ``name.1``, ...;
    * a ``dict``: visit each value under ``name.key``;
    * anything else (ints, plain Tensors, functions) holds no parameters.

    At the top level (``prefix=""``) names have no leading dot. Keep
    duplicates (a shared parameter appears under each name): removing them
    is :meth:`Module.named_parameters`'s job. Check ``Parameter`` before
    anything else (it is also a Tensor).

    Example:
        >>> net = Sequential(Linear(2, 3), ReLU(), Linear(3, 1))
        >>> [name for name, _ in find_parameters(net)]
        ['layers.0.weight', 'layers.0.bias', 'layers.2.weight', 'layers.2.bias']
    """
    raise NotImplementedError("Exercise 2.11: find_parameters")


_TREE = [0]  # bumped whenever an attribute of any module is set
_WALKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> its last walk


def _items(c) -> tuple:
    return (tuple(c), tuple(map(id, c.values()))) if isinstance(c, dict) else tuple(map(id, c))


def _containers(root) -> list:
    """Every list and dict reachable from ``root`` through modules, lists, tuples and dicts,
    with the identities of what they hold (what a remembered walk depends on)."""
    found, todo, seen = [], [root], set()
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Module):
            todo.extend(v for k, v in vars(x).items() if not k.startswith("_"))
        elif isinstance(x, (list, dict)):
            found.append((x, _items(x)))
            todo.extend(x.values() if isinstance(x, dict) else x)
        elif isinstance(x, tuple):
            todo.extend(x)
    return found


def _unchanged(found: list) -> bool:
    return all(_items(c) == snap for c, snap in found)


class Module:
    """Base class of layers and models: subclass it, set attributes, define ``forward``."""

    training: bool = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        _TREE[0] += 1  # the remembered walks (named_parameters) start again

    def __delattr__(self, name: str) -> None:
        object.__delattr__(self, name)
        _TREE[0] += 1

    def named_parameters(self) -> list[tuple[str, Parameter]]:
        """``(name, parameter)`` for every parameter, each object once (first name wins).

        The walk is remembered until an attribute of any module is set or a list or
        dict in the tree changes (a training loop asks on every step: one check, no walk).
        """
        key = (_TREE[0], implementation("2.11"))
        try:
            hit = _WALKS.get(self)
        except TypeError:  # a module class that cannot be hashed: walk every time
            hit = False
        if hit and hit[0] == key and _unchanged(hit[1]):
            return list(hit[2])
        seen, out = set(), []
        for name, p in find_parameters(self):
            if id(p) not in seen:
                seen.add(id(p))
                out.append((name, p))
        if hit is not False:
            _WALKS[self] = (key, _containers(self), out)
        return list(out)

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def modules(self) -> Iterator[Module]:
        """This module and every sub-module (depth first)."""
        yield self
        for value in vars(self).values():
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, Module):
                    yield from item.modules()

    def train(self, mode: bool = True) -> Module:
        """Put this module and its sub-modules in training mode (``eval()`` undoes it)."""
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def to(self, device: str) -> Module:
        """Move every parameter to ``device`` (``"cpu"`` or ``"cuda"``) in place: the same
        Parameter objects, so move a model before making its optimizer (whose buffers
        follow the parameters' device when they are made)."""
        if device not in ("cpu", "cuda"):
            raise OpError(
                "Module.to",
                f"device {device!r} is not a device",
                hint="'cpu' or 'cuda' (a module's dtype is set when its parameters are made)",
            )
        for p in self.parameters():
            if p.device != device:
                moved = p.detach().to(device)
                p._data, p.device, p.grad = moved._data, device, None
        return self

    def num_parameters(self) -> int:
        return sum(p.size for p in self.parameters())

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}{tuple(p.shape)}" for n, p in self.named_parameters())
        return f"{type(self).__name__}({inner})"


def device_of(module: Module) -> str:
    """The device of ``module``'s parameters (``"cpu"`` without any): where its inputs go."""
    params = module.parameters()
    return params[0].device if params else "cpu"


class Linear(Module):
    """``y = x @ weight + bias`` with ``weight`` of shape ``(in_features, out_features)``.

    Weights are uniform in ``±1/sqrt(in_features)`` from a generator seeded by
    ``seed``, so a model is the same on every run.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        seed: int = 0,
        dtype=dt.float32,
    ):
        rng = np.random.default_rng(seed)
        bound = 1 / math.sqrt(in_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(
            rng.uniform(-bound, bound, (in_features, out_features)), dtype=dtype
        )
        self.bias = (
            Parameter(rng.uniform(-bound, bound, (out_features,)), dtype=dtype) if bias else None
        )

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1:] != (self.in_features,):
            raise OpError(
                "Linear",
                f"expected inputs with {self.in_features} features in the last dimension, "
                f"got shape {x.shape}",
                hint="reshape the input to (batch, in_features)",
            )
        y = x @ self.weight
        return y if self.bias is None else y + self.bias

    def __repr__(self) -> str:
        return f"Linear({self.in_features}, {self.out_features}, bias={self.bias is not None})"


class Sequential(Module):
    """Apply ``layers`` in order."""

    def __init__(self, *layers: Module):
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        return "Sequential(" + ", ".join(map(repr, self.layers)) + ")"


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class Sigmoid(Module):
    def forward(self, x):
        return x.sigmoid()


class Tanh(Module):
    def forward(self, x):
        return x.tanh()
