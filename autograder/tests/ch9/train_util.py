"""Shared by the chapter 9 (train) graded tests: small models, seeded data, eager vs compiled."""

from __future__ import annotations

import numpy as np

import minitorch
from minitorch import nn
from minitorch.compile.backward import StepTrace
from minitorch.nn import functional as F
from minitorch.tracing.tracer import Tracer


def trace_with_grads(fn, shapes, needs):
    """Trace ``fn`` on inputs of ``shapes`` as a step trace: ``(tracer, step, proxies, out)``."""
    tracer = Tracer("t", fullgraph=True)
    st = tracer.training = StepTrace(tracer)
    with tracer:
        xs = []
        for k, (shape, g) in enumerate(zip(shapes, needs)):
            x = tracer.input(minitorch.Spec(tuple(shape), minitorch.float32), f"x{k}")
            x.requires_grad = g
            if g:
                st.grad_nodes.add(x.node)
            xs.append(x)
        out = fn(*xs)
    tracer.live = True  # the graph stays open: the test records the backward into it
    return tracer, st, xs, out


def batches(seed, n, batch, features, classes):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.standard_normal((batch, features)).astype(np.float32)
        out.append((minitorch.tensor(x), minitorch.tensor(rng.integers(0, classes, batch))))
    return out


def make_step(model, opt, loss_fn=F.cross_entropy):
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def train(sizes, data, compiled, opt_kind="sgd", mode="default", **hyper):
    """Train ``nn.mlp(sizes)`` on ``data``; losses, parameters, gradients, the step used."""
    model = nn.mlp(list(sizes), seed=0)
    if opt_kind == "sgd":
        opt = nn.SGD(model, **hyper)
    else:
        opt = nn.Adam(model, **hyper)
    step = make_step(model, opt)
    f = minitorch.compile(step, mode=mode) if compiled else step
    losses = [float(f(x, y).item()) for x, y in data]
    params = [p.numpy().copy() for p in model.parameters()]
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    return losses, params, grads, f
