"""A catalogue of bad calls across the public API: each must fail at once with a clear error.

Every entry is ``(call, exception type, words the message must contain)``; the
words name the op and the offending argument (or its value), so the message
says what was wrong where, never a bare error from deep inside a kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch as mt
from minitorch.fast.cnn import DigitsCNN
from minitorch.fast.cnn import cross_entropy as cnn_loss
from minitorch.nn import functional as F
from minitorch.onnx import export

x = mt.tensor(np.arange(6.0).reshape(2, 3))
v = mt.tensor([1.0, 2.0, 3.0])
i = mt.tensor([1, 2, 3])
b = mt.tensor([True, False, True])
s = mt.tensor(3.0)
img = mt.zeros(1, 1, 4, 4)
w = mt.zeros(2, 1, 3, 3)
E = mt.OpError


def relu(t):
    return t.relu()


CATALOGUE = [
    # shapes and sizes
    ("reshape float size", lambda: x.reshape(2.9, 3), E, ["reshape", "2.9"]),
    ("reshape wrong count", lambda: x.reshape(4, 2), E, ["reshape", "(4, 2)"]),
    ("reshape two -1", lambda: x.reshape(-1, -1), E, ["reshape", "-1"]),
    ("reshape negative", lambda: x.reshape(-2, -3), E, ["reshape", "-2"]),
    ("reshape string", lambda: x.reshape("6"), E, ["reshape", "'6'"]),
    ("expand negative", lambda: v.expand(-1, 3), E, ["expand", "-1"]),
    ("expand shrink", lambda: x.expand(2, 1), E, ["expand", "(2, 1)"]),
    ("expand float", lambda: v.expand(2.0, 3), E, ["expand", "2.0"]),
    ("expand fewer dims", lambda: x.expand(3), E, ["expand", "(3,)"]),
    ("permute float", lambda: x.permute(0.5, 1), E, ["permute", "0.5"]),
    ("permute repeated", lambda: x.permute(0, 0), E, ["permute", "(0, 0)"]),
    ("permute too few", lambda: x.permute(0), E, ["permute", "(0,)"]),
    ("transpose out of range", lambda: x.transpose(0, 5), E, ["transpose", "5"]),
    ("transpose 1-D", lambda: v.transpose(0, 2), E, ["transpose", "2"]),
    ("transpose float", lambda: x.transpose(0.0, 1), E, ["transpose", "0.0"]),
    ("zeros negative", lambda: mt.zeros(-1, 2), E, ["zeros", "-1"]),
    ("ones float", lambda: mt.ones(2.5), E, ["ones", "2.5"]),
    ("full negative", lambda: mt.full((2, -3), 1.0), E, ["full", "-3"]),
    ("rand float", lambda: mt.rand(1.5, 2), E, ["rand", "1.5"]),
    ("randn negative", lambda: mt.randn(-4), E, ["randn", "-4"]),
    # axes and flags
    ("sum float axis", lambda: x.sum(axis=1.5), E, ["sum", "1.5"]),
    ("sum string axis", lambda: x.sum(axis="0"), E, ["sum", "'0'"]),
    ("sum axis out of range", lambda: x.sum(axis=2), E, ["sum", "axis 2"]),
    ("sum axis too negative", lambda: x.sum(axis=-3), E, ["sum", "-3"]),
    ("sum repeated axis", lambda: x.sum(axis=(1, -1)), E, ["sum", "repeated"]),
    ("sum bool axis", lambda: x.sum(axis=True), E, ["sum", "True"]),
    ("sum keepdims string", lambda: x.sum(keepdims="yes"), E, ["sum", "keepdims", "'yes'"]),
    ("mean keepdims int", lambda: x.mean(axis=0, keepdims=2), E, ["mean", "keepdims", "2"]),
    ("max axis float", lambda: x.max(axis=0.0), E, ["max", "0.0"]),
    ("min axis out of range", lambda: v.min(axis=1), E, ["min", "axis 1"]),
    ("max of empty", lambda: mt.zeros(0, 3).max(axis=0), E, ["max", "empty"]),
    ("0-d axis 1", lambda: s.sum(axis=1), E, ["sum", "axis 1"]),
    ("argmax tuple axis", lambda: x.argmax(axis=(0, 1)), E, ["argmax", "(0, 1)"]),
    ("argmax None axis", lambda: x.argmax(axis=None), E, ["argmax", "None"]),
    ("argmax out of range", lambda: x.argmax(axis=2), E, ["argmax", "axis 2"]),
    ("argmax 0-d", lambda: s.argmax(), E, ["argmax", "dimension"]),
    ("argmax keepdims", lambda: x.argmax(axis=0, keepdims="no"), E, ["argmax", "keepdims"]),
    ("softmax tuple axis", lambda: mt.dispatch("softmax", x, axis=(0, 1)), E, ["softmax", "(0, 1)"]),
    ("logsumexp keepdims", lambda: mt.dispatch("logsumexp", x, axis=0, keepdims="x"), E, ["logsumexp", "keepdims"]),
    # dtypes and values
    ("requires_grad on int", lambda: mt.tensor([1, 2], requires_grad=True), E, ["tensor", "requires_grad", "int64"]),
    ("requires_grad on bool", lambda: mt.tensor([True], requires_grad=True), E, ["tensor", "requires_grad", "bool"]),
    ("set requires_grad on int", lambda: setattr(mt.tensor([1]), "requires_grad", True), E, ["requires_grad", "int64"]),
    ("uint64 too big", lambda: mt.tensor(np.array([2**63 + 5], dtype=np.uint64)), E, ["tensor", str(2**63 + 5), "int64"]),
    ("python int 2**70", lambda: mt.tensor([1, 2**70]), E, ["tensor", str(2**70), "int64"]),
    ("uint64 as int64", lambda: mt.tensor(np.array([2**64 - 1], dtype=np.uint64), dtype="int64"), E, ["tensor", str(2**64 - 1)]),
    ("2**70 as int64", lambda: mt.tensor([2**70], dtype="int64"), E, ["tensor", "int64", "too large"]),
    ("string as float32", lambda: mt.tensor(["a"], dtype="float32"), E, ["tensor", "float32", "'a'"]),
    ("int tensor plus 2**70", lambda: i + 2**70, E, ["tensor", str(2**70)]),
    ("string data", lambda: mt.tensor(["a", "b"]), E, ["tensor", "dtype <U1", "numbers"]),
    ("unknown dtype", lambda: mt.tensor([1.0], dtype="float16"), E, ["tensor", "float16"]),
    ("astype unknown", lambda: x.astype("complex64"), E, ["astype", "complex64"]),
    ("to tpu", lambda: x.to("tpu"), E, ["to", "'tpu'", "cuda"]),
    ("to None", lambda: x.to(None), E, ["to", "None"]),
    ("int to negative power", lambda: i ** -1, E, ["pow", "negative", "float"]),
    ("int to negative tensor power", lambda: i ** mt.tensor([1, -2, 0]), E, ["pow", "negative"]),
    ("neg of bool", lambda: -b, E, ["neg", "bool"]),
    ("bool minus bool", lambda: b - b, E, ["sub", "bool"]),
    ("conv of ints", lambda: mt.dispatch("conv2d", mt.zeros(1, 1, 3, 3, dtype="int64"), mt.zeros(1, 1, 2, 2, dtype="int64")), E, ["conv2d", "int64"]),
    # creation
    ("arange step 0", lambda: mt.arange(0, 10, 0), E, ["arange", "step", "0"]),
    ("arange string", lambda: mt.arange("5"), E, ["arange", "'5'"]),
    ("arange nan step", lambda: mt.arange(0, 1, float("nan")), E, ["arange", "step"]),
    # broadcasting, devices, matmul
    ("add shape mismatch", lambda: x + mt.zeros(4), E, ["add", "(2, 3)", "(4,)"]),
    ("where shape mismatch", lambda: mt.where(b, x, mt.zeros(4)), E, ["where", "(4,)"]),
    ("matmul vector", lambda: v @ v, E, ["matmul", "(3,)"]),
    ("matmul inner mismatch", lambda: x @ x, E, ["matmul", "(2, 3)"]),
    ("mixed devices", lambda: v + mt.tensor([1.0, 2.0, 3.0], device="cuda"), E, ["add", "devices", "cuda"]),
    ("unknown device", lambda: mt.tensor([1.0], device="tpu"), E, ["device", "'tpu'"]),
    ("add a string", lambda: x + "a", E, ["str"]),
    # indexing
    ("index out of range", lambda: x[2], E, ["2", "size 2"]),
    ("index float", lambda: x[0.5], E, ["getitem", "0.5"]),
    ("index too many", lambda: x[0, 0, 0], E, ["getitem", "too many"]),
    ("index bool", lambda: x[True], E, ["getitem", "True"]),
    ("index a list", lambda: x[[0, 1]], E, ["getitem", "[0, 1]"]),
    # ops and attributes
    ("unknown attribute", lambda: mt.dispatch("sum", x, axes=0), E, ["sum", "axes"]),
    ("missing attribute", lambda: mt.dispatch("reshape", x), E, ["reshape", "shape"]),
    ("wrong input count", lambda: mt.dispatch("add", x), E, ["add", "2"]),
    ("non-tensor input", lambda: mt.dispatch("exp", [1.0]), E, ["exp", "list"]),
    ("unknown op", lambda: mt.dispatch("frobnicate", x), KeyError, ["frobnicate"]),
    ("conv channel mismatch", lambda: mt.dispatch("conv2d", mt.zeros(1, 2, 4, 4), w), E, ["conv2d", "channels"]),
    ("conv 3-D input", lambda: mt.dispatch("conv2d", mt.zeros(1, 4, 4), w), E, ["conv2d", "4-D"]),
    ("conv stride 0", lambda: mt.dispatch("conv2d", img, w, stride=0), E, ["conv2d", "stride"]),
    ("conv padding float", lambda: mt.dispatch("conv2d", img, w, padding=0.5), E, ["conv2d", "padding"]),
    ("pool kernel 0", lambda: mt.dispatch("max_pool2d", img, kernel_size=0), E, ["max_pool2d", "kernel_size"]),
    ("pool window too big", lambda: mt.dispatch("avg_pool2d", img, kernel_size=5), E, ["avg_pool2d", "window"]),
    ("item of many", lambda: x.item(), E, ["item", "(2, 3)"]),
    ("bool of many", lambda: bool(x), E, ["bool", "ambiguous"]),
    # losses
    ("cross_entropy target = C", lambda: F.cross_entropy(x, mt.tensor([0, 3])), E, ["cross_entropy", "3", "[0, 3)"]),
    ("cross_entropy target -1", lambda: F.cross_entropy(x, mt.tensor([-1, 0])), E, ["cross_entropy", "-1"]),
    ("cross_entropy float target", lambda: F.cross_entropy(x, mt.tensor([0.5, 1.0])), E, ["cross_entropy", "float32"]),
    ("cross_entropy 1-D logits", lambda: F.cross_entropy(v, mt.tensor([0])), E, ["cross_entropy", "(3,)"]),
    ("cross_entropy shape", lambda: F.cross_entropy(x, mt.tensor([0, 1, 2])), E, ["cross_entropy", "(3,)"]),
    ("cnn cross_entropy target = C", lambda: cnn_loss(x, mt.tensor([0, 3])), E, ["cross_entropy", "3", "[0, 3)"]),
    ("cnn cross_entropy target -1", lambda: cnn_loss(x, mt.tensor([-1, 0])), E, ["cross_entropy", "-1"]),
    ("cnn cross_entropy float target", lambda: cnn_loss(x, mt.tensor([0.0, 1.0])), E, ["cross_entropy", "float32"]),
    # onnx.export: every argument checked before tracing
    ("export opset 1", lambda: export(relu, v, opset=1), E, ["onnx.export", "opset 1", "18"]),
    ("export opset string", lambda: export(relu, v, opset="18"), E, ["onnx.export", "opset", "'18'"]),
    ("export opset bool", lambda: export(relu, v, opset=True), E, ["onnx.export", "opset", "True"]),
    ("export an int", lambda: export(3, v), E, ["onnx.export", "fn_or_model", "int"]),
    ("export a class", lambda: export(DigitsCNN, v), E, ["onnx.export", "DigitsCNN", "instance"]),
    ("export numpy input", lambda: export(relu, np.ones(3)), E, ["onnx.export", "example_inputs", "ndarray"]),
    ("export int input", lambda: export(relu, (v, 3)), E, ["onnx.export", "example_inputs[1]", "int"]),
    ("export path int", lambda: export(relu, v, 3), E, ["onnx.export", "path", "int"]),
    ("export path no folder", lambda: export(relu, v, "/no/such/dir/m.onnx"), E, ["onnx.export", "/no/such/dir", "folder"]),
    ("export axes string", lambda: export(relu, v, dynamic_axes="batch"), E, ["onnx.export", "dynamic_axes", "str"]),
    ("export axes dim out of range", lambda: export(relu, x, dynamic_axes={"input0": {2: "b"}}), E, ["onnx.export", "dim 2", "[2, 3]"]),
    ("export axes name not a str", lambda: export(relu, x, dynamic_axes={"input0": {0: 5}}), E, ["onnx.export", "5", "identifier"]),
    ("export axes unknown input", lambda: export(relu, x, dynamic_axes={"x": [0]}), E, ["onnx.export", "'x'", "input0"]),
    ("export axes one name two sizes", lambda: export(lambda a, c: a, (x, v), dynamic_axes={0: {0: "n"}, 1: {0: "n"}}), E, ["onnx.export", "'n'", "size 2", "size 3"]),
    ("export a list of inputs", lambda: export(lambda a, c: a + c, [v, v]), E, ["onnx.export", "example_inputs", "list", "tuple"]),
    ("export a float output", lambda: export(lambda t: (t * 2, 3.0), v), E, ["onnx.export", "result[1]", "3.0", "float", "tensor"]),
    ("export only a float", lambda: export(lambda t: 3.0, v), E, ["onnx.export", "result", "3.0", "tensor"]),
    ("export None in a dict", lambda: export(lambda t: {"y": t, "n": None}, v), E, ["onnx.export", "result['n']", "None"]),
    ("export no output", lambda: export(lambda t: (), v), E, ["onnx.export", "no tensor"]),
    # compile and jit: their own arguments
    ("compile mode list", lambda: mt.compile(relu, mode=["default"]), E, ["compile", "mode", "['default']", "'reduce-overhead'"]),
    ("compile mode typo", lambda: mt.compile(relu, mode="fast"), E, ["compile", "'fast'", "'max-autotune'"]),
    ("compile a Module class", lambda: mt.compile(mt.nn.Linear), E, ["compile", "class Linear", "compile(nn.Linear(...))"]),
    ("jit a Module class", lambda: mt.jit(DigitsCNN), E, ["jit", "class DigitsCNN", "jit(DigitsCNN(...))"]),
    ("compile a class", lambda: mt.compile(dict), E, ["compile", "class dict"]),
]  # fmt: skip


def test_catalogue_is_large_enough():
    assert len(CATALOGUE) >= 60
    assert len({label for label, *_ in CATALOGUE}) == len(CATALOGUE)


@pytest.mark.parametrize("label,call,exc,words", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_bad_call_fails_clearly(label, call, exc, words):
    with pytest.raises(exc) as info:
        call()
    message = str(info.value)
    missing = [word for word in words if word not in message]
    assert not missing, f"{label}: message {message!r} does not mention {missing}"
