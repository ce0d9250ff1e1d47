"""Known-wrong implementations of Chapter 2 (backward rules, backprop, losses, optimizers).

Most are the reference with one rule changed: the unchanged cases call it.
"""

from __future__ import annotations

from minitorch.autograd.backprop import toposort as _toposort
from minitorch.autograd.rules import unbroadcast as _unbroadcast
from minitorch.core.creation import arange
from solutions.reference import ch2 as ref

from . import mutant

# ---------------------------------------------------------------- 2.1 unbroadcast


@mutant("2.1", "returns the gradient unchanged")
def unbroadcast(grad, shape):
    return grad


@mutant("2.1", "sums the leading dims but not the dims that grew from 1")
def unbroadcast_leading_only(grad, shape):
    lead = grad.ndim - len(shape)
    return grad.sum(axis=tuple(range(lead))) if lead else grad


@mutant("2.1", "sums the dims that grew from 1 without keepdims")
def unbroadcast_drops_dims(grad, shape):
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    if lead:
        grad = grad.sum(axis=tuple(range(lead)))
    grown = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    return grad.sum(axis=grown) if grown else grad


@mutant("2.1", "averages the copies instead of summing them")
def unbroadcast_mean(grad, shape):
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    if lead:
        grad = grad.mean(axis=tuple(range(lead)))
    grown = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    return grad.mean(axis=grown, keepdims=True) if grown else grad


# ---------------------------------------------------------------- 2.2 unary_vjp


@mutant("2.2", "sigmoid: grad * out, the (1 - out) factor forgotten")
def unary_vjp(op, grad, out, a):
    return grad * out if op == "sigmoid" else ref.unary_vjp(op, grad, out, a)


@mutant("2.2", "relu: mask a >= 0, so the kink at 0 passes the gradient")
def unary_vjp_relu_kink(op, grad, out, a):
    if op == "relu":
        return grad * (a >= 0).astype(grad.dtype)
    return ref.unary_vjp(op, grad, out, a)


@mutant("2.2", "tanh: 1 - a * a instead of 1 - out * out")
def unary_vjp_tanh_input(op, grad, out, a):
    return grad * (1 - a * a) if op == "tanh" else ref.unary_vjp(op, grad, out, a)


@mutant("2.2", "sqrt: grad / (2 * a) instead of grad / (2 * out)")
def unary_vjp_sqrt(op, grad, out, a):
    return grad * 0.5 / a if op == "sqrt" else ref.unary_vjp(op, grad, out, a)


@mutant("2.2", "recip: the sign forgotten")
def unary_vjp_recip_sign(op, grad, out, a):
    return grad * out * out if op == "recip" else ref.unary_vjp(op, grad, out, a)


# ---------------------------------------------------------------- 2.3 binary_vjp


@mutant("2.3", "gradients not reduced to the inputs' shapes")
def binary_vjp(op, grad, out, a, b):
    if op == "add":
        return grad, grad
    if op == "sub":
        return grad, -grad
    if op == "mul":
        return grad * b, grad * a
    ga = grad / b
    return ga, -ga * a / b


@mutant("2.3", "div: the sign of b's gradient lost")
def binary_vjp_div_sign(op, grad, out, a, b):
    if op == "div":
        ga = grad / b
        return _unbroadcast(ga, a.shape), _unbroadcast(ga * a / b, b.shape)
    return ref.binary_vjp(op, grad, out, a, b)


@mutant("2.3", "mul: each input gets itself instead of the other one")
def binary_vjp_mul_swapped(op, grad, out, a, b):
    if op == "mul":
        return _unbroadcast(grad * a, a.shape), _unbroadcast(grad * b, b.shape)
    return ref.binary_vjp(op, grad, out, a, b)


@mutant("2.3", "sub: b's gradient not negated")
def binary_vjp_sub(op, grad, out, a, b):
    if op == "sub":
        return _unbroadcast(grad, a.shape), _unbroadcast(grad, b.shape)
    return ref.binary_vjp(op, grad, out, a, b)


# ---------------------------------------------------------------- 2.4 reduce_vjp


@mutant("2.4", "max: every tied maximum gets the whole gradient")
def reduce_vjp(op, grad, out, a, axis, keepdims):
    if op == "max":
        kept = tuple(1 if d in axis else n for d, n in enumerate(a.shape))
        if not keepdims:
            grad, out = grad.reshape(kept), out.reshape(kept)
        return (a == out).astype(grad.dtype) * grad
    return ref.reduce_vjp(op, grad, out, a, axis, keepdims)


@mutant("2.4", "mean: divides by the size of the whole tensor")
def reduce_vjp_mean_size(op, grad, out, a, axis, keepdims):
    if op == "mean":
        return ref.reduce_vjp("sum", grad, out, a, axis, keepdims) / a.size
    return ref.reduce_vjp(op, grad, out, a, axis, keepdims)


@mutant("2.4", "keepdims=False not undone: expands the gradient as it is")
def reduce_vjp_no_reshape(op, grad, out, a, axis, keepdims):
    if op == "sum":
        return grad.expand(a.shape)
    return ref.reduce_vjp(op, grad, out, a, axis, True)


@mutant("2.4", "max: the gradient goes to the first maximum only, as argmax picks")
def reduce_vjp_first_max(op, grad, out, a, axis, keepdims):
    if op == "max" and len(axis) == 1:
        kept = tuple(1 if d in axis else n for d, n in enumerate(a.shape))
        if not keepdims:
            grad = grad.reshape(kept)
        first = a.argmax(axis=axis[0], keepdims=True)
        n = a.shape[axis[0]]
        shape = [1] * a.ndim
        shape[axis[0]] = n
        hit = (arange(n).reshape(*shape) == first).astype(grad.dtype)
        return hit * grad
    return ref.reduce_vjp(op, grad, out, a, axis, keepdims)


@mutant("2.4", "mean over several axes divides by the first axis's length only")
def reduce_vjp_mean_first_axis(op, grad, out, a, axis, keepdims):
    if op == "mean":
        return ref.reduce_vjp("sum", grad, out, a, axis, keepdims) / (
            a.shape[axis[0]] if axis else 1
        )
    return ref.reduce_vjp(op, grad, out, a, axis, keepdims)


# ---------------------------------------------------------------- 2.5 matmul_vjp


@mutant("2.5", "gradients not reduced over broadcast batch dims")
def matmul_vjp(grad, out, a, b):
    return grad @ b.transpose(-2, -1), a.transpose(-2, -1) @ grad


@mutant("2.5", "transposes the first two dims instead of the last two")
def matmul_vjp_transpose(grad, out, a, b):
    ga = grad @ b.transpose(0, 1)
    gb = a.transpose(0, 1) @ grad
    return _unbroadcast(ga, a.shape), _unbroadcast(gb, b.shape)


@mutant("2.5", "a not transposed for b's gradient: a @ grad")
def matmul_vjp_no_transpose(grad, out, a, b):
    return _unbroadcast(grad @ b.transpose(-2, -1), a.shape), _unbroadcast(a @ grad, b.shape)


# ---------------------------------------------------------------- 2.6 view_vjp


@mutant("2.6", "permute: applies the same order instead of its inverse")
def view_vjp(op, grad, a, attrs):
    if op == "permute":
        return grad.permute(*attrs["order"])
    return ref.view_vjp(op, grad, a, attrs)


@mutant("2.6", "expand: the gradient returned without summing the copies")
def view_vjp_expand(op, grad, a, attrs):
    if op == "expand":
        lead = grad.ndim - a.ndim
        return grad.sum(axis=tuple(range(lead))) if lead else grad
    return ref.view_vjp(op, grad, a, attrs)


@mutant("2.6", "reshape: flattens the gradient instead of giving it a's shape")
def view_vjp_reshape(op, grad, a, attrs):
    if op == "reshape":
        return grad.reshape(-1) if a.ndim == 1 else grad.reshape(a.shape[::-1])
    return ref.view_vjp(op, grad, a, attrs)


# ---------------------------------------------------------------- 2.7 toposort


@mutant("2.7", "recursive depth-first search: deep graphs overflow the stack")
def toposort(root):
    order, seen = [], set()

    def visit(t):
        if id(t) in seen or not t.requires_grad:
            return
        seen.add(id(t))
        if t._node is not None:
            for x in t._node.inputs:
                visit(x)
        order.append(t)

    visit(root)
    return order[::-1]


@mutant("2.7", "order not reversed: leaves first, the root last")
def toposort_not_reversed(root):
    return ref.toposort(root)[::-1]


@mutant("2.7", "constants (no requires_grad) included")
def toposort_with_constants(root):
    order, seen = [], set()
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
                if id(x) not in seen:
                    stack.append((x, False))
    return order[::-1]


@mutant("2.7", "breadth-first order: a shared input can come before one of its users")
def toposort_bfs(root):
    order, seen, queue = [], {id(root)}, [root] if root.requires_grad else []
    while queue:
        t = queue.pop(0)
        order.append(t)
        if t._node is not None:
            for x in t._node.inputs:
                if x.requires_grad and id(x) not in seen:
                    seen.add(id(x))
                    queue.append(x)
    return order


# ---------------------------------------------------------------- 2.8 backpropagate


def _backprop(root, grad, accumulate=True, order=None, seed=True):
    grads = {id(root): grad if seed else grad * 0 + 1}
    for t in order if order is not None else _toposort(root):
        g = grads.get(id(t))
        node = t._node
        if g is None or node is None:
            continue
        in_grads = node.op.vjp(g, t, *node.inputs, **node.attrs)
        for x, gx in zip(node.inputs, in_grads):
            if gx is None or not x.requires_grad:
                continue
            prev = grads.get(id(x))
            grads[id(x)] = gx if prev is None or not accumulate else prev + gx
    return grads


@mutant("2.8", "= instead of +=: a value used twice keeps only the last gradient")
def backpropagate(root, grad):
    return _backprop(root, grad, accumulate=False)


@mutant("2.8", "walks the order backwards: leaves before the tensors that use them")
def backpropagate_reversed(root, grad):
    return _backprop(root, grad, order=_toposort(root)[::-1])


@mutant("2.8", "ignores the incoming gradient and seeds with ones")
def backpropagate_ones(root, grad):
    return _backprop(root, grad, seed=False)


# ---------------------------------------------------------------- 2.9 log_softmax


@mutant("2.9", "no max shift: exp overflows for large inputs")
def log_softmax(x, axis=-1):
    return x - x.exp().sum(axis=axis, keepdims=True).log()


@mutant("2.9", "always normalises over the last axis")
def log_softmax_last_axis(x, axis=-1):
    return ref.log_softmax(x, -1)


@mutant("2.9", "subtracts the log-sum of the shifted values from the unshifted x")
def log_softmax_unshifted(x, axis=-1):
    z = x - x.detach().max(axis=axis, keepdims=True)
    return x - z.exp().sum(axis=axis, keepdims=True).log()


# ---------------------------------------------------------------- 2.10 cross_entropy


@mutant("2.10", "sums over the batch instead of averaging")
def cross_entropy(logits, targets):
    return ref.cross_entropy(logits, targets) * logits.shape[0]


@mutant("2.10", "the minus sign forgotten")
def cross_entropy_sign(logits, targets):
    return -ref.cross_entropy(logits, targets)


@mutant("2.10", "no shape checks: bad targets give a wrong number, not an OpError")
def cross_entropy_unchecked(logits, targets):
    n, c = logits.shape[0], logits.shape[-1]
    onehot = (targets.reshape(-1, 1) == arange(c).reshape(1, c)).astype(logits.dtype)
    return -(ref.log_softmax(logits, axis=-1) * onehot).sum() / n


@mutant("2.10", "divides by the number of classes instead of the batch size")
def cross_entropy_by_classes(logits, targets):
    n, c = logits.shape
    return ref.cross_entropy(logits, targets) * n / c


# ---------------------------------------------------------------- 2.11 find_parameters


def _walk(obj, prefix, lists=True, dicts=True, private=False, full_names=True):
    from minitorch.nn.module import Module, Parameter

    found = []

    def name_of(name, key):
        return f"{name}.{key}" if name and full_names else str(key)

    def visit(value, name):
        if isinstance(value, Parameter):
            found.append((name, value))
        elif isinstance(value, Module):
            for key, item in vars(value).items():
                if private or not key.startswith("_"):
                    visit(item, name_of(name, key))
        elif lists and isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                visit(item, name_of(name, i))
        elif dicts and isinstance(value, dict):
            for key, item in value.items():
                visit(item, name_of(name, key))

    visit(obj, prefix)
    return found


@mutant("2.11", "lists and tuples of modules not searched")
def find_parameters(obj, prefix=""):
    return _walk(obj, prefix, lists=False)


@mutant("2.11", "dicts not searched")
def find_parameters_no_dicts(obj, prefix=""):
    return _walk(obj, prefix, dicts=False)


@mutant("2.11", "names are the last attribute only, not the dotted path")
def find_parameters_short_names(obj, prefix=""):
    return _walk(obj, prefix, full_names=False)


@mutant("2.11", "private attributes (leading underscore) included")
def find_parameters_private(obj, prefix=""):
    return _walk(obj, prefix, private=True)


# ---------------------------------------------------------------- 2.12 sgd_step


@mutant("2.12", "weight decay subtracted from the gradient instead of added")
def sgd_step(param, grad, velocity, lr, momentum, weight_decay):
    return ref.sgd_step(param, grad - weight_decay * param, velocity, lr, momentum, 0.0)


@mutant("2.12", "momentum with dampening: (1 - momentum) * grad")
def sgd_step_dampening(param, grad, velocity, lr, momentum, weight_decay):
    if weight_decay:
        grad = grad + weight_decay * param
    if momentum:
        velocity = grad if velocity is None else momentum * velocity + (1 - momentum) * grad
        return param - lr * velocity, velocity
    return param - lr * grad, velocity


@mutant("2.12", "the velocity is updated but the step uses the raw gradient")
def sgd_step_ignores_velocity(param, grad, velocity, lr, momentum, weight_decay):
    _, velocity = ref.sgd_step(param, grad, velocity, lr, momentum, weight_decay)
    if weight_decay:
        grad = grad + weight_decay * param
    return param - lr * grad, velocity


@mutant("2.12", "weight decay added to the step after momentum, not to the gradient")
def sgd_step_decay_late(param, grad, velocity, lr, momentum, weight_decay):
    new, velocity = ref.sgd_step(param, grad, velocity, lr, momentum, 0.0)
    return new - lr * weight_decay * param, velocity


# ---------------------------------------------------------------- 2.13 adam_step


@mutant("2.13", "no bias correction")
def adam_step(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    if weight_decay:
        grad = grad + weight_decay * param
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    return param - lr * m / (v.sqrt() + eps), m, v


@mutant("2.13", "eps inside the square root")
def adam_step_eps(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    if weight_decay:
        grad = grad + weight_decay * param
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    return param - lr * m_hat / (v_hat + eps).sqrt(), m, v


@mutant("2.13", "the second moment averages the gradient, not its square")
def adam_step_v(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    if weight_decay:
        grad = grad + weight_decay * param
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * abs(grad)
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    return param - lr * m_hat / (v_hat + eps), m, v


@mutant("2.13", "decoupled weight decay (AdamW) instead of adding it to the gradient")
def adam_step_decoupled(param, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    new, m, v = ref.adam_step(param, grad, m, v, t, lr, beta1, beta2, eps, 0.0)
    return new - lr * weight_decay * param, m, v


# ---------------------------------------------------------------- issue 29: contract gaps


def _backprop_checked(root, grad, none_check=True, shape_check=True):
    grads = {id(root): grad}
    for t in _toposort(root):
        g = grads.get(id(t))
        node = t._node
        if g is None or node is None:
            continue
        if node.op.vjp is None:
            raise RuntimeError(f"backward: the op {node.op.name!r} has no backward rule")
        for x, gx in zip(node.inputs, node.op.vjp(g, t, *node.inputs, **node.attrs)):
            if (none_check and gx is None) or not x.requires_grad:
                continue
            if shape_check and gx is not None and gx.shape != x.shape:
                raise RuntimeError(f"backward: {node.op.name!r}: {gx.shape} for {x.shape}")
            prev = grads.get(id(x))
            grads[id(x)] = gx if prev is None or gx is None else prev + gx
    return grads


@mutant("2.8", "accepts a rule's gradient of the wrong shape")
def backpropagate_no_shape_check(root, grad):
    return _backprop_checked(root, grad, shape_check=False)


@mutant("2.8", "no None check: an input whose rule gave None is recorded with None")
def backpropagate_keeps_none(root, grad):
    return _backprop_checked(root, grad, none_check=False)


@mutant("2.8", "calls a missing rule: TypeError instead of a RuntimeError naming the op")
def backpropagate_calls_missing_rule(root, grad):
    return _backprop(root, grad)
