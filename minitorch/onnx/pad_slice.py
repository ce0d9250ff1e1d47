"""Chapter 10's open exercise (10.7): an ONNX form for ``pad_slice``, the adjoint of indexing.

``pad_slice(values, key, shape)`` (chapter 2) is ``zeros(shape)`` with ``values``
written at ``[key]``: the gradient of ``x[key]``, so it is in every traced graph
that differentiates through indexing (a saliency map, an exported training step).
ONNX has no operator for it, and the exporter had no emitter, so such graphs were
refused (10.6's "no ONNX mapping"). Here you write one from standard opset-18
operators of your choice.

``node.attrs`` holds ``key`` (a tuple of ints and slices, as ``getitem`` takes it:
any step, negative indices, fewer entries than dims) and ``shape``. ``names[0]`` is
the ONNX name of ``values``, shaped like ``zeros(shape)[key]``.
"""

from __future__ import annotations

from ..core.registry import get_op
from ..exercises import exercise
from .context import OnnxContext

MAX_CONSTANTS_PER_DIM = 32  # numbers of initializers an emitter may add per dim of the result


@exercise("10.7")
def emit_pad_slice(ctx: OnnxContext, node, names: list[str]) -> str:
    """Write ``pad_slice`` as standard ONNX nodes with ``ctx``; return the result's name.

    Any lowering is allowed (``Pad``, ``Slice``, ``Reshape``, ``Unsqueeze``,
    ``ScatterND``...) as long as the exported model agrees with minitorch **bit for
    bit**: NaN, infinities and -0.0 in ``values`` are copied as they are, every
    other element is +0 of the node's dtype (float32, float64, int64, bool...), and
    the shape is ``node.attrs["shape"]``. A dim listed in ``ctx.dims(node)`` is
    dynamic (its key is ``slice(None)``): the model must also run when that dim has
    another size. The initializers you add hold at most
    :data:`MAX_CONSTANTS_PER_DIM` numbers per dim of the result in all: the model
    file may not grow with the tensor (no zeros or index tables of its size).

    Graded on a fixed suite of keys and shapes: validity first (``onnx.checker``,
    onnxruntime's bits against eager's, other batch sizes), then the ONNX nodes your
    emitter writes per ``pad_slice``, the fewer the more points.

    Example:
        >>> # %0 = pad_slice(%v, key=(1:3,), shape=(4, 2)), v = [[1, 2], [3, 4]]
        >>> emit_pad_slice(ctx, node, ["input0"])   # e.g. one Pad node
        'pad_1'
        >>> # onnxruntime: [[0, 0], [1, 2], [3, 4], [0, 0]]

    Hints: book chapter 10, "An open problem".
    """
    raise NotImplementedError("Exercise 10.7: emit_pad_slice")


get_op("pad_slice").onnx = emit_pad_slice
