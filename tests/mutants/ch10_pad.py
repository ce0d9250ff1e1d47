"""Chapter 10 (pad_slice's emitter) known-wrong implementations of 10.7: each must lose points.

Exercise 10.7 is open: any lowering that gives eager's bits is an answer. These are the
wrong ones (strides or reversal ignored, -0.0 lost, an index table as big as the tensor,
dynamic dims written as fixed sizes, a negative index used as it is) and a valid but
long one (one step per dim) that reaches only the lower node tiers.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from . import mutant

END = 2**62


def _key(node):
    shape = tuple(node.attrs["shape"])
    return tuple(node.attrs["key"]) + (slice(None),) * (len(shape) - len(node.attrs["key"])), shape


def _i64(ctx, v):
    return ctx.const(np.array(v, np.int64))


def _zeros_like_node(ctx, node, shape):
    zero = numpy_helper.from_array(np.zeros(1, node.spec.dtype), "value")
    return ctx.node("ConstantOfShape", [_i64(ctx, list(shape))], value=zero)


def _per_dim(ctx, node, names, steps=True, reverse=True, wrap=True, fixed=False, add_zero=False):
    """One dim at a time: Unsqueeze an integer index, reverse a negative step with a Slice,
    spread a step with Unsqueeze, Pad, Reshape and a Slice, then Pad to the size."""
    key, shape = _key(node)
    if 0 in np.zeros(shape)[key].shape:
        return _zeros_like_node(ctx, node, shape)
    x, dyn = names[0], ctx.dims(node)
    box = tuple(k if isinstance(k, slice) else slice(k % n, k % n + 1) for k, n in zip(key, shape))
    window = list(np.zeros(shape)[box].shape)
    for d, k in enumerate(key):  # the integer-indexed dims first, one Unsqueeze each
        if not isinstance(k, slice):
            x = ctx.node("Unsqueeze", [x, _i64(ctx, [d])])
    for d, k in enumerate(key):
        if d in dyn and not fixed:
            continue
        n = shape[d]
        if not isinstance(k, slice):
            i = int(k) % n if wrap else int(k)
            lo, w, s = i, 1, 1
        else:
            r = range(*k.indices(n))
            lo, w, s = (r[0] if r else 0), len(r), (r.step if len(r) > 1 else 1)
            if s < 0:
                if reverse:
                    x = ctx.node("Slice", [x, *(_i64(ctx, [b]) for b in (-1, -END, d, -1))])
                lo, s = r[-1], -s
            if not steps:
                s = 1
        if s > 1:
            x = ctx.node("Unsqueeze", [x, _i64(ctx, [d + 1])])
            pads = [0] * (2 * (len(shape) + 1))
            pads[len(shape) + 1 + d + 1] = s - 1
            x = ctx.node("Pad", [x, _i64(ctx, pads)])
            after = [-1 if j in dyn else window[j] for j in range(d + 1, len(shape))]
            x = ctx.node("Reshape", [x, _i64(ctx, [0] * d + [w * s] + after)])
            bounds = ([0], [(w - 1) * s + 1], [d], [1])
            x = ctx.node("Slice", [x, *(_i64(ctx, b) for b in bounds)])
            w = (w - 1) * s + 1
        pads = [0] * (2 * len(shape))
        pads[d], pads[len(shape) + d] = lo, n - lo - w
        if any(pads):
            x = ctx.node("Pad", [x, _i64(ctx, pads)])
        window[d] = n
    if fixed:
        x = ctx.node("Reshape", [x, _i64(ctx, list(shape))])
    if add_zero:  # "zeros plus the padded values": -0.0 + 0.0 is +0.0
        x = ctx.node("Add", [x, _zeros_like_node(ctx, node, shape)])
    return x


@mutant("10.7", "valid, one step per dim: more nodes than needed, only the lower tiers")
def emit_pad_slice(ctx, node, names):
    return _per_dim(ctx, node, names)


@mutant("10.7", "ignores the step: every window written as a block")
def emit_pad_slice(ctx, node, names):  # noqa: F811
    return _per_dim(ctx, node, names, steps=False)


@mutant("10.7", "a negative step spaced out but not reversed: the values in the wrong order")
def emit_pad_slice(ctx, node, names):  # noqa: F811
    return _per_dim(ctx, node, names, reverse=False)


@mutant("10.7", "a negative integer index used as it is: a negative pad crops")
def emit_pad_slice(ctx, node, names):  # noqa: F811
    return _per_dim(ctx, node, names, wrap=False)


@mutant("10.7", "zeros plus the padded values: -0.0 comes back as +0.0")
def emit_pad_slice(ctx, node, names):  # noqa: F811
    return _per_dim(ctx, node, names, add_zero=True)


@mutant("10.7", "dynamic dims written with their traced size: one batch size only")
def emit_pad_slice(ctx, node, names):  # noqa: F811
    return _per_dim(ctx, node, names, fixed=True)


@mutant("10.7", "zeros of the full shape and a ScatterND index table: the file grows with x")
def emit_pad_slice(ctx, node, names):  # noqa: F811
    key, shape = _key(node)
    positions = np.arange(int(np.prod(shape))).reshape(shape)[key]
    index = np.stack(np.unravel_index(positions, shape), axis=-1).astype(np.int64)
    zeros = ctx.const(np.zeros(shape, node.spec.dtype))
    return ctx.node("ScatterND", [zeros, ctx.const(index), names[0]])


def _blocks(ctx, node, names, flaw):
    """Reverse, insert, pad, merge blocks, then crop or pad: with one ``flaw``."""
    shape = tuple(node.attrs["shape"])
    key = tuple(node.attrs["key"]) + (slice(None),) * (len(shape) - len(node.attrs["key"]))
    dyn = ctx.dims(node)
    dims = [
        (0, n, 1, False) if d in dyn else _window(k, n) for d, (k, n) in enumerate(zip(key, shape))
    ]
    x = names[0]
    kept = [d for d, k in enumerate(key) if isinstance(k, slice)]
    if flaw == "reverse_key_dim":  # the key's position, not the values' axis
        rev = [d for d in kept if dims[d][3]]
    else:
        rev = [j for j, d in enumerate(kept) if dims[d][3]]
    if rev:
        bounds = ([-1] * len(rev), [-END] * len(rev), rev, [-1] * len(rev))
        x = ctx.node("Slice", [x, *(_i64(ctx, b) for b in bounds)])
    inserted, lo_pads, hi_pads, target, rest = [], [], [], [], []
    for d, (lo, w, s, _) in enumerate(dims):
        axis = len(lo_pads)
        if not isinstance(key[d], slice):
            inserted.append(axis)
        if s > 1:
            q, r = divmod(lo, s)
            lo_pads += [q, r]
            hi_pads += [0, s - 1 - r]
            inserted.append(axis + 1)
            target.append((q + w) * s)
            rest.append(shape[d] - (q + w) * s)
        else:
            lo_pads.append(lo)
            hi_pads.append(shape[d] - lo - w)
            # "reshape_zero": Reshape's 0 (copy the input's size) even where block axes moved it
            same = axis == d or flaw == "reshape_zero"
            target.append((0 if same else -1) if d in dyn else shape[d])
            rest.append(0)
    if inserted:
        x = ctx.node("Unsqueeze", [x, _i64(ctx, inserted)])
    if any(lo_pads) or any(hi_pads):
        x = ctx.node("Pad", [x, _i64(ctx, lo_pads + hi_pads)])
    if len(lo_pads) != len(shape):
        x = ctx.node("Reshape", [x, _i64(ctx, target)])
    if any(rest):
        x = ctx.node("Pad", [x, _i64(ctx, [0] * len(shape) + rest)])
    return x


def _window(k, size):
    if not isinstance(k, slice):
        return int(k) % size, 1, 1, False
    r = range(*k.indices(size))
    if len(r) <= 1:
        return (r[0] if r else 0), len(r), 1, False
    return (r[-1], len(r), -r.step, True) if r.step < 0 else (r.start, len(r), r.step, False)


@mutant(
    "10.7", "reverses the key's dim, not the values' axis: an integer index before it shifts it"
)
def emit_pad_slice(ctx, node, names):  # noqa: F811
    return _blocks(ctx, node, names, "reverse_key_dim")


@mutant("10.7", "a dynamic dim copied with Reshape's 0 after a strided dim added a block axis")
def emit_pad_slice(ctx, node, names):  # noqa: F811
    return _blocks(ctx, node, names, "reshape_zero")
