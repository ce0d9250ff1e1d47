"""Reference solutions, Chapter 2 (Autograd and training). Same names and signatures as the stubs."""

from __future__ import annotations

import math

from minitorch.autograd.backprop import toposort as _toposort
from minitorch.autograd.ops import pad_slice
from minitorch.autograd.rules import unbroadcast as _unbroadcast
from minitorch.core.creation import arange
from minitorch.core.errors import OpError

# ---------------------------------------------------------------- 2.1-2.6 rules


def unbroadcast(grad, shape):
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    if lead:
        grad = grad.sum(axis=tuple(range(lead)))
    grown = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    if grown:
        grad = grad.sum(axis=grown, keepdims=True)
    return grad


def unary_vjp(op, grad, out, a):
    if op == "neg":
        return -grad
    if op == "abs":
        return grad * ((a > 0).astype(grad.dtype) - (a < 0).astype(grad.dtype))
    if op == "exp":
        return grad * out
    if op == "log":
        return grad / a
    if op == "sqrt":
        return grad * 0.5 / out
    if op == "recip":
        return -grad * out * out
    if op == "tanh":
        return grad * (1 - out * out)
    if op == "sigmoid":
        return grad * out * (1 - out)
    if op == "relu":
        return grad * (a > 0).astype(grad.dtype)  # a mask, not where(): every backend has it
    raise KeyError(f"unary_vjp: no rule for {op!r}")


def binary_vjp(op, grad, out, a, b):
    if op == "add":
        ga, gb = grad, grad
    elif op == "sub":
        ga, gb = grad, -grad
    elif op == "mul":
        ga, gb = grad * b, grad * a
    elif op == "div":
        ga = grad / b
        gb = -ga * a / b
    else:
        raise KeyError(f"binary_vjp: no rule for {op!r}")
    return _unbroadcast(ga, a.shape), _unbroadcast(gb, b.shape)


def reduce_vjp(op, grad, out, a, axis, keepdims):
    kept = tuple(1 if d in axis else n for d, n in enumerate(a.shape))
    if not keepdims:
        grad = grad.reshape(kept)
        out = out.reshape(kept)
    if op == "sum":
        return grad.expand(a.shape)
    if op == "mean":
        count = math.prod(a.shape[d] for d in axis)
        return (grad / count).expand(a.shape)
    if op == "max":
        hit = (a == out).astype(grad.dtype)
        share = grad / hit.sum(axis=axis, keepdims=True)
        return hit * share
    raise KeyError(f"reduce_vjp: no rule for {op!r}")


def matmul_vjp(grad, out, a, b):
    if b.ndim == 2 and a.ndim > 2:
        # every row of the stack meets the same b: one product over all the rows (as
        # torch does) instead of one per matrix and a sum over the stack, 10-30% faster
        g = grad.reshape(-1, grad.shape[-1])
        ga = (g @ b.transpose(-2, -1)).reshape(a.shape)
        return ga, a.reshape(-1, a.shape[-1]).transpose(-2, -1) @ g
    ga = grad @ b.transpose(-2, -1)
    gb = a.transpose(-2, -1) @ grad
    return _unbroadcast(ga, a.shape), _unbroadcast(gb, b.shape)


def view_vjp(op, grad, a, attrs):
    if op == "permute":
        order = attrs["order"]
        inverse = [0] * len(order)
        for i, d in enumerate(order):
            inverse[d] = i
        return grad.permute(*inverse)
    if op == "reshape":
        return grad.reshape(a.shape)
    if op == "expand":
        return _unbroadcast(grad, a.shape)
    if op == "getitem":
        return pad_slice(grad, attrs["key"], a.shape)
    raise KeyError(f"view_vjp: no rule for {op!r}")


# ---------------------------------------------------------------- 2.7-2.8 backprop


def toposort(root):
    order, seen = [], set()
    if not root.requires_grad:
        return order
    # Iterative post-order DFS: a tensor is emitted after all of its inputs.
    stack = [(root, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        if t._node is not None:
            for x in t._node.inputs:
                if x.requires_grad and id(x) not in seen:
                    stack.append((x, False))
    order.reverse()
    return order


def backpropagate(root, grad):
    grads = {id(root): grad}
    for t in _toposort(root):
        g = grads.get(id(t))
        node = t._node
        if g is None or node is None:
            continue
        if node.op.vjp is None:
            raise RuntimeError(
                f"backward: the op {node.op.name!r} has no backward rule; register one "
                "with @register_vjp, or compute this part under no_grad()"
            )
        in_grads = node.op.vjp(g, t, *node.inputs, **node.attrs)
        for x, gx in zip(node.inputs, in_grads):
            if gx is None or not x.requires_grad:
                continue
            if gx.shape != x.shape:
                raise RuntimeError(
                    f"backward: the rule of {node.op.name!r} returned a gradient of shape "
                    f"{gx.shape} for an input of shape {x.shape}"
                )
            prev = grads.get(id(x))
            grads[id(x)] = gx if prev is None else prev + gx
    return grads


# ---------------------------------------------------------------- 2.9-2.10 losses


def log_softmax(x, axis=-1):
    # Shift by the max (a constant for the gradient) so exp never overflows.
    shift = x.detach().max(axis=axis, keepdims=True)
    z = x - shift
    return z - z.exp().sum(axis=axis, keepdims=True).log()


def _check_targets(targets, c):
    if targets.dtype.kind not in "iu":
        raise OpError(
            "cross_entropy",
            f"targets must be int64 class indices, got dtype {targets.dtype}",
            hint="pass targets.astype('int64') if they hold whole numbers",
        )
    # values are known in eager mode only: a traced target (chapter 5; its type takes over
    # dispatch with __minitorch_dispatch__) has none to read
    if targets.size and getattr(type(targets), "__minitorch_dispatch__", None) is None:
        values = targets.numpy()
        bad = values[(values < 0) | (values >= c)]
        if bad.size:
            raise OpError(
                "cross_entropy",
                f"targets must be class indices in [0, {c}), got {bad[0]}",
                hint=f"logits have {c} classes; targets index them from 0",
            )


def cross_entropy(logits, targets):
    if logits.ndim != 2:
        raise OpError(
            "cross_entropy",
            f"logits must have shape (batch, classes), got {logits.shape}",
            hint="reshape to (-1, classes) first",
        )
    n, c = logits.shape
    if targets.shape != (n,):
        raise OpError(
            "cross_entropy",
            f"targets must have shape ({n},) to match logits {logits.shape}, got {targets.shape}",
            hint="pass one integer class index per row",
        )
    _check_targets(targets, c)
    classes = arange(c, device=logits.device)  # on the logits' device: cuda tensors too
    onehot = (targets.reshape(n, 1) == classes.reshape(1, c)).astype(logits.dtype)
    return -(log_softmax(logits, axis=1) * onehot).sum() / n


# ---------------------------------------------------------------- 2.11 parameters


def find_parameters(obj, prefix=""):
    from minitorch.nn.module import Module, Parameter

    found = []

    def visit(value, name):
        if isinstance(value, Parameter):
            found.append((name, value))
        elif isinstance(value, Module):
            for key, item in vars(value).items():
                if not key.startswith("_"):
                    visit(item, f"{name}.{key}" if name else key)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                visit(item, f"{name}.{i}" if name else str(i))
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(item, f"{name}.{key}" if name else str(key))

    visit(obj, prefix)
    return found


# ---------------------------------------------------------------- 2.12-2.13 optimizers


def sgd_step(param, grad, velocity, lr, momentum, weight_decay):
    if weight_decay:
        grad = grad + weight_decay * param
    if momentum:
        velocity = grad if velocity is None else momentum * velocity + grad
        step = velocity
    else:
        step = grad
    return param - lr * step, velocity


def adam_step(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    if weight_decay:
        grad = grad + weight_decay * param
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v
