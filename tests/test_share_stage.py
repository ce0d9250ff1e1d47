"""The max-autotune stage "share" (``fusion/share.py``): a GELU whose gradient recomputes
its ``tanh`` is written out as its parts and the gradient reads the forward's ``tanh``;
anything else is left as it is. A TinyGPT step with it keeps eager's bits:
``tests/test_recompute_stage.py``'s training step."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.fusion import share
from minitorch.tracing.graph import Graph

pytestmark = pytest.mark.usefixtures("reference_mode")  # tests/conftest.py


def _vjp_tanh(dtype=np.float32, swap=False, cube=0.044715, scale=np.sqrt(2 / np.pi)):
    """A graph with gelu(x) and the VJP's tanh(C * (x + x*x*x*0.044715))."""
    g = Graph("g")
    x = g.add_input(mt.tensor(np.zeros((2, 3), dtype)).spec, "x")
    c = lambda v: g.add_const(mt.tensor(np.asarray(v, dtype)))  # noqa: E731
    node = lambda op, *i: g.add_node(op, list(i), {}, x.spec)  # noqa: E731
    gelu = node("gelu", x)
    cubic = node("mul", node("mul", node("mul", x, x), x), c(cube))
    t = node("tanh", node("mul", node("add", *((cubic, x) if swap else (x, cubic))), c(scale)))
    g.set_outputs([gelu, t])
    return g, x, gelu, t


@pytest.mark.parametrize("swap", [False, True])
def test_the_vjps_tanh_is_recognised_either_way_round(swap):
    g, x, _, t = _vjp_tanh(swap=swap)
    assert share.gelu_argument_of(t) is x


@pytest.mark.parametrize("kw", [{"cube": 0.05}, {"scale": 0.8}])
def test_another_constant_is_not_gelus_tanh(kw):
    g, _, gelu, t = _vjp_tanh(**kw)
    assert share.gelu_argument_of(t) is None
    assert share.share_gelu_tanh(g) == [] and gelu in g.nodes


def test_the_rewrite_keeps_values_and_order():
    g, x, gelu, t = _vjp_tanh(np.float64)
    (tanh,) = share.share_gelu_tanh(g)
    assert gelu not in g.nodes and t not in g.nodes
    assert g.outputs[1] is tanh and "gelu" not in [n.op for n in g.nodes]
    pos = {n: k for k, n in enumerate(g.nodes)}
    assert all(pos[i] < pos[n] for n in g.nodes for i in n.inputs)  # still topological
    g.verify()
