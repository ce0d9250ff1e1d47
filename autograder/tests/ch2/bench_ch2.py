"""Chapter 2 benchmark: backward costs a small multiple of forward, and what the tape holds.

The gradients it times are checked against a numpy backward pass written here,
so a backward that skips work earns nothing. Forward and forward+backward are
timed in interleaved rounds on CPU time with one BLAS thread (``compare``,
``one_thread``), so a busy machine slows both sides alike.
"""

import numpy as np

import minitorch
from autograder.harness import assert_close, benchmark, compare, one_thread, perturb
from minitorch.autograd import tape_bytes
from minitorch.nn import functional as F
from minitorch.nn import mlp


def _numpy_grads(params, x, y):
    """Loss and gradients of the mean cross-entropy of ``Linear, ReLU, ..., Linear``, in numpy."""
    params = [p.astype(np.float64) for p in params]
    acts, h = [x.astype(np.float64)], x.astype(np.float64)
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i + 2 < len(params):
            h = np.maximum(h, 0.0)
        acts.append(h)
    z = acts[-1] - acts[-1].max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    n = len(y)
    loss = -logp[np.arange(n), y].mean()
    d = np.exp(logp)
    d[np.arange(n), y] -= 1.0
    d /= n
    grads = [None] * len(params)
    for i in range(len(params) - 2, -1, -2):
        grads[i], grads[i + 1] = acts[i // 2].T @ d, d.sum(axis=0)
        d = d @ params[i].T
        if i > 0:
            d = d * (acts[i // 2] > 0)
    return loss, grads


@benchmark(
    "2.8",
    points=2,
    metric="backward_over_forward",
    higher_is_better=False,
    bands=[(8.0, 1.0), (16.0, 0.5), (32.0, 0.25)],
    formula="max(forward_backward - forward, 0) / forward",
    baseline=("forward",),
)
def bench_backward_over_forward(report):
    # forward is the course's (timed on its code): a learner's forward, padded, would both
    # be subtracted and divide, and lower the figure. x changes before every sample, and
    # the parent reads the loss and every gradient, so gradients kept from an earlier
    # call are wrong (tests/hostile/bench_memo_backward.py).
    model = mlp([64, 128, 128, 10], seed=0)
    rng = np.random.default_rng(0)
    xn, yn = rng.random((64, 64)).astype(np.float32), rng.integers(0, 10, 64)
    x, y = minitorch.tensor(xn, dtype="float32"), minitorch.tensor(yn)
    params = list(model.parameters())

    def forward():
        return F.cross_entropy(model(x), y)

    def forward_backward():
        model.zero_grad()
        loss = forward()
        loss.backward()
        return loss

    def _grad(p):
        return np.zeros(p.shape, np.float32) if p.grad is None else p.grad.numpy()

    def loss_and_grads(loss):
        return np.concatenate([loss.numpy().reshape(-1)] + [_grad(p).reshape(-1) for p in params])

    def verify(name, loss):
        want_loss, want_grads = _numpy_grads([p.numpy() for p in params], x.numpy(), yn)
        assert_close(loss.numpy(), want_loss, "2.8", rtol=1e-4, atol=1e-5)
        if name == "forward_backward":
            for p, g in zip(params, want_grads):
                assert_close(_grad(p), g, "2.8", rtol=1e-3, atol=1e-5)

    with one_thread():
        t = compare({"forward": forward, "forward_backward": forward_backward}, verify=verify,
                    output={"forward": None, "forward_backward": loss_and_grads},
                    vary=perturb(x._data.storage), tol=(1e-4, 1e-5))  # fmt: skip
    fwd = t.best["forward"]
    bwd = max(t.best["forward_backward"] - fwd, 0.0)
    loss = forward()
    size = sum(p.size * p.dtype.itemsize for p in params)
    report(
        forward_ms=fwd * 1e3,
        backward_ms=bwd * 1e3,
        tape_kib=tape_bytes(loss) / 1024,
        parameter_kib=size / 1024,
    )
