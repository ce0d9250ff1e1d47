"""What an emitter writes into: ONNX nodes, initializers and fresh value names."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


class OnnxContext:
    """Collects the ONNX nodes and initializers of one export.

    ``dynamic`` maps a graph node's name to ``{dim: symbol}`` for its dims that
    change with the batch (see ``dynamic_dims``); emitters read it with ``dims``.
    """

    def __init__(self, dynamic: dict | None = None):
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.dynamic = dynamic or {}
        self._count = 0

    def fresh(self, hint: str = "t") -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def node(self, op_type: str, inputs: list[str], output: str | None = None, **attrs) -> str:
        """Append one ONNX node with a single output; returns the output's name."""
        out = output or self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, array, name: str | None = None) -> str:
        """Store ``array`` as an initializer (a constant stored in the model file)."""
        name = name or self.fresh("const")
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def cast(self, name: str, have, want) -> str:
        """``name`` converted to dtype ``want`` (no node when it already is)."""
        if np.dtype(have) == np.dtype(want):
            return name
        return self.node("Cast", [name], to=self.onnx_dtype(want))

    def dims(self, node) -> dict[int, str]:
        return self.dynamic.get(node.name, {})

    @staticmethod
    def onnx_dtype(dtype) -> int:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def value_info(self, name: str, node) -> onnx.ValueInfoProto:
        """The type of a graph input or output: dtype and shape, dynamic dims by symbol."""
        dyn = self.dims(node)
        shape = [dyn.get(d, s) for d, s in enumerate(node.spec.shape)]
        return helper.make_tensor_value_info(name, self.onnx_dtype(node.spec.dtype), shape)
