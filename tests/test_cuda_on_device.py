"""Issue 39: no cuda kernel copies data to the host.

Every op of the registry runs its cuda kernel once on small inputs (drawn by the
differential suite's cases, laid out at random) while every way a kernel could read
device memory from the host raises: the backend's ``to_numpy``, a device array's
``copy_to_host``, a scalar read of a device array outside a kernel, and a host array
passed to a kernel (the launch would copy it to the device and back). The test
iterates the registry, so a new op cannot skip it.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest
from backends_util import on
from hypothesis import assume, given
from hypothesis import strategies as st
from test_differential import (
    FRAMEWORK_OPS,
    NO_KERNEL,
    _assert_matches,
    _expected,
    _laid_out,
    _run,
    _settings,
)

import minitorch as mt
from minitorch.backends import base as backends
from minitorch.cuda import backend as cb


class HostCopy(AssertionError):
    pass


def _refuse(what):
    def fn(*args, **kwargs):
        raise HostCopy(f"a cuda kernel copied device data to the host ({what})")

    return fn


@contextlib.contextmanager
def no_host_copies(monkeypatch):
    array = type(cb.cuda.device_array(1))
    getitem = array.__getitem__

    def device_getitem(self, key):
        value = getitem(self, key)
        if not _in_kernel() and np.ndim(value) == 0 and not hasattr(value, "copy_to_host"):
            raise HostCopy(f"a cuda kernel read a device element on the host ({key!r})")
        return value

    with monkeypatch.context() as m:
        m.setattr(cb._BACKEND, "to_numpy", _refuse("to_numpy"))
        m.setattr(array, "copy_to_host", _refuse("copy_to_host"))
        m.setattr(array, "__getitem__", device_getitem)
        if cb.SIMULATOR:  # a host array as a kernel argument is copied in and back out
            import numba.cuda.simulator.kernel as sim

            m.setattr(sim, "InOut", _refuse("a host array passed to a kernel"))
        yield


def _in_kernel() -> bool:
    # a simulated thread's indices live on the running thread (OS thread or greenlet's host)
    return cb.SIMULATOR and getattr(threading.current_thread(), "threadIdx", None) is not None


@pytest.mark.parametrize("name", sorted(FRAMEWORK_OPS))
def test_cuda_kernel_stays_on_the_device(name, monkeypatch):
    if (name, "cuda") in NO_KERNEL:
        pytest.skip(f"{name} has no cuda kernel (test_differential checks the refusal)")
    op = mt.get_op(name)

    @_settings("cuda")
    @given(data=st.data())
    def check(data):
        arrays, attrs, ref = _run("cuda", name, data, smooth=False)
        with on("cuda") as T:
            inputs, used = _laid_out(data, T, arrays)
        want, refused = _expected(ref, used)
        # an input numpy refuses never reaches a kernel; an empty one may not launch it
        assume(refused is None and all(a.size for a in used) and want.size)
        specs = [t.spec for t in inputs]
        bound = op.bind(attrs, specs)
        out = op.infer(*specs, **bound)
        kernel = backends.current("cuda").kernel(op)
        with no_host_copies(monkeypatch):
            data_out = kernel(*(t._data for t in inputs), out=out, **bound)
        got = mt.Tensor._make(data_out, "cuda").numpy()
        assert got.shape == want.shape
        _assert_matches(got, want, np.dtype(out.dtype), f"{name} on cuda: {specs}, {attrs}")

    check()


def test_a_host_copy_is_caught(monkeypatch):
    t = mt.tensor(np.arange(3.0), device="cuda")
    with no_host_copies(monkeypatch), pytest.raises(HostCopy):
        t.numpy()
    with no_host_copies(monkeypatch), pytest.raises(HostCopy):
        float(t._data.storage[1])
