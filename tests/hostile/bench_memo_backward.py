# ruff: noqa: F821  (plain_backprop, burn_while_timed, toposort: tests/hostile/_plain_backprop.py)
"""A correct backward that burns 0.1 s, once: later calls on the same parameters return the
gradients it kept. 2.8's benchmark used to time one fixed input, so the kept ones were right."""

EXERCISE = "2.8"
_kept = {}


def attack(root, grad):
    leaves = [t for t in toposort(root) if t._node is None]
    key = tuple(id(t) for t in leaves)
    if key not in _kept:
        burn_while_timed(0.1)
        grads = plain_backprop(root, grad)
        _kept[key] = [grads.get(id(t)) for t in leaves]
    return {id(t): g for t, g in zip(leaves, _kept[key]) if g is not None}
