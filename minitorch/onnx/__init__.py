"""Chapter 10: ONNX export, so that a trained model leaves Python.

    minitorch.onnx.export(model, minitorch.randn(8, 64), "model.onnx",
                          dynamic_axes={"input0": {0: "batch"}})

Needs the ``onnx`` package (and ``onnxruntime`` to run the result); both are
pinned in requirements.txt.
"""

from .context import OnnxContext
from .export import MAX_OPSET, OPSET, dynamic_dims, export, graph_to_onnx, trace_for_export
from .mapping import register_onnx
from .pad_slice import emit_pad_slice
from .sizes import symbols

__all__ = [
    "MAX_OPSET",
    "OPSET",
    "OnnxContext",
    "dynamic_dims",
    "emit_pad_slice",
    "export",
    "graph_to_onnx",
    "register_onnx",
    "symbols",
    "trace_for_export",
]
