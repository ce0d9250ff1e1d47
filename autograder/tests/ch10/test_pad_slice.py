"""Graded tests, chapter 10: an ONNX form for ``pad_slice`` (10.7), graded on its outcome.

Any lowering may be right, so nothing here compares with the reference's nodes: the
exported model must pass ``onnx.checker``, onnxruntime must give eager's bits on every
key of the suite (``pad_suite.SUITE``: NaN, inf and -0.0 copied, +0 elsewhere, four
dtypes), the programs of ``pad_suite.DYNAMIC`` must run at other batch sizes, the
constants may not grow with the tensor, and the points grow with how few ONNX nodes
the emitter writes. Nodes and constants are counted here, from the model itself
(subgraphs included), never through the learner's code.

Measured on the suite (mean ONNX nodes per ``pad_slice`` over its 16 keys): one step
per dim (an Unsqueeze per integer index, a Slice per reversed dim, four nodes per
strided dim, a Pad per dim) 3.75; the reference 2.50 (one Slice, one Unsqueeze, one
Pad, one Reshape and one Pad at most, each only when needed).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

import minitorch
from autograder.harness import check, graded
from minitorch.onnx import export, graph_to_onnx
from minitorch.onnx.pad_slice import MAX_CONSTANTS_PER_DIM

from .pad_suite import BATCHES, DYNAMIC, SUITE, dynamic_input, program, values


def _session(model: onnx.ModelProto):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _nodes(graph: onnx.GraphProto) -> int:
    """Nodes of ``graph``, those of subgraphs (If, Loop, Scan bodies) included."""
    n = 0
    for node in graph.node:
        n += 1
        for a in node.attribute:
            n += _nodes(a.g) if a.HasField("g") else 0
            n += sum(_nodes(g) for g in a.graphs)
    return n


def _constants(model: onnx.ModelProto) -> int:
    """Numbers held by the model's initializers and Constant/ConstantOfShape attributes."""
    total = sum(int(np.prod(i.dims)) for i in model.graph.initializer)
    for node in model.graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                total += int(np.prod(a.t.dims))
            total += len(a.floats) + len(a.ints)
    return total


def _same_bits(got, want: np.ndarray) -> bool:
    """Shape, dtype and every byte: NaN, infinities and the sign of zero included."""
    got = np.asarray(got)
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


def _flat(arrays) -> np.ndarray:
    parts = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    return np.concatenate(parts) if parts else np.zeros(0)


def _run_suite() -> tuple[dict, list, dict]:
    """Each key of the suite exported and run: {name: what went wrong}, the outputs
    (onnxruntime's where it agreed, eager's otherwise) and {name: (nodes, constants, ndim)}."""
    wrong, outs, figures = {}, [], {}
    for name, (key, shape, dtype) in SUITE.items():
        v = values(key, shape, dtype)
        fn = program(key, shape)
        want = fn(minitorch.tensor(v)).numpy()
        try:
            model = graph_to_onnx(minitorch.jit(fn).trace(minitorch.tensor(v)), {})
            onnx.checker.check_model(model, full_check=True)
            (got,) = _session(model).run(None, {"input0": v})
        except Exception as e:  # noqa: BLE001 - the learner's emitter or its model failed
            wrong[name] = f"{type(e).__name__}: {str(e)[:300]}"
            outs.append(want)
            continue
        if not _same_bits(got, want):
            wrong[name] = (
                f"onnxruntime's {np.asarray(got).dtype}{list(np.shape(got))} differs from "
                f"eager's {want.dtype}{list(want.shape)} (bits compared: NaN, inf, -0.0)"
            )
            outs.append(want)
            continue
        outs.append(got)
        # the one pad_slice's nodes: all but graph_to_onnx's output Identity
        figures[name] = (_nodes(model.graph) - 1, _constants(model), len(shape))
    return wrong, outs, figures


# ---------------------------------------------------------------- validity


@graded("10.7", points=3)
def test_pad_slice_exports_with_eager_bits():
    """contract: Write ``pad_slice`` as standard ONNX nodes with ``ctx``"""
    wrong, outs, _ = _run_suite()
    check(
        not wrong,
        "10.7",
        "every key of the suite must export, pass onnx.checker and give eager's bits in "
        "onnxruntime (NaN, inf and -0.0 copied, +0 elsewhere, the node's dtype and shape)",
        value=_flat(outs),
        wrong=wrong,
    )


@graded("10.7", points=2)
def test_pad_slice_runs_at_other_batch_sizes():
    """contract: the model must also run when that dim has another size"""
    wrong, outs = {}, []
    for name, (fn, shape, dim) in DYNAMIC.items():
        try:
            x = minitorch.tensor(dynamic_input(shape, 4, dim=dim))
            model = export(fn, x, dynamic_axes={"input0": {dim: "batch"}})
            sess = _session(model)
        except Exception as e:  # noqa: BLE001
            wrong[name] = f"{type(e).__name__}: {str(e)[:300]}"
            continue
        for batch in BATCHES:
            x = dynamic_input(shape, batch, 1, dim)
            want = fn(minitorch.tensor(x)).numpy()
            try:
                (got,) = sess.run(None, {"input0": x})
            except Exception as e:  # noqa: BLE001
                wrong[f"{name} at batch {batch}"] = f"{type(e).__name__}: {str(e)[:300]}"
                outs.append(want)
                continue
            if not np.allclose(got, want, rtol=1e-6, atol=0, equal_nan=True):
                wrong[f"{name} at batch {batch}"] = "differs from eager"
                got = want
            outs.append(got)
    check(
        not wrong,
        "10.7",
        "exported with a dynamic dim (dim 0, or dim 1 after a strided dim 0; keyed "
        "slice(None)), the model must also run with that dim 1, 4 and 9: read "
        "ctx.dims(node), do not write the traced size",
        value=_flat(outs),
        tol=(1e-6, 0.0),
        wrong=wrong,
    )


@graded("10.7", points=1)
def test_pad_slice_constants_do_not_grow_with_the_tensor():
    """contract: the model file may not grow with the tensor"""
    wrong, outs, figures = _run_suite()
    check(not wrong, "10.7", "a key of the suite failed: see the test above", wrong=wrong)
    big = {
        name: f"{c} numbers for {d} dims"
        for name, (_, c, d) in figures.items()
        if c > MAX_CONSTANTS_PER_DIM * d
    }
    check(
        not big,
        "10.7",
        f"the model's constants hold at most {MAX_CONSTANTS_PER_DIM} numbers per dim of the "
        "result: no zeros or index tables the size of the tensor",
        value=_flat(outs),
        too_big=big,
    )


# ---------------------------------------------------------------- outcome


def _outcome(limit: float) -> None:
    wrong, outs, figures = _run_suite()
    check(not wrong, "10.7", "a key of the suite failed: see the first test", wrong=wrong)
    big = [name for name, (_, c, d) in figures.items() if c > MAX_CONSTANTS_PER_DIM * d]
    check(not big, "10.7", "constants that grow with the tensor: see the test above", keys=big)
    mean = sum(n for n, _, _ in figures.values()) / len(figures)
    check(
        mean <= limit,
        "10.7",
        f"mean ONNX nodes per pad_slice over the suite {mean:.2f}; this tier needs {limit} "
        "or fewer (one step per dim: 3.75)",
        value=_flat(outs),
        nodes="; ".join(f"{name} {n}" for name, (n, _, _) in figures.items()),
    )


@graded("10.7", points=1)
def test_pad_slice_outcome_exports():
    _outcome(5.0)


@graded("10.7", points=1)
def test_pad_slice_outcome_merges_steps():
    # one step per dim: 3.75; one Unsqueeze for all the integer indices and one Pad for
    # all the dims that are not strided reach this tier
    _outcome(3.5)


@graded("10.7", points=2)
def test_pad_slice_outcome_few_nodes():
    # the reference 2.50: a strided dim's offset padded in whole blocks, before its Reshape
    _outcome(2.75)
