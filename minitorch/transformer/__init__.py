"""Chapter 11: a small transformer, end to end: new ops, fused kernels, variable-length
training and generation, eager against compiled.

* ``ops``: embedding and its scatter-add gradient (11.1), layer norm and its
  backward (11.2), GELU, a causal mask; ``attention``: attention from registry ops (11.3);
* ``cuda``: fused softmax and layer-norm kernels graded by memory traffic (11.4, 11.5);
* ``data``: the text, a character tokenizer, bucketed variable-length batches (11.6);
* ``model``: ``TinyGPT`` and its key/value-cache decode step; ``generate``: sampling (11.7);
* ``batched``: the prompt in one prefill pass (11.15), prompts of different lengths in one
  batch (11.16);
* ``measure``: the chapter's figures (eager against compiled training and decoding,
  traces, memory, ONNX, profiles).
"""

from . import (
    gpu_row,  # noqa: F401  (TinyGPT's row of chapter 9's table on cuda)
    ops,  # noqa: F401  (registers the chapter's ops)
)
from .attention import attention
from .batched import generate_batch, prefill
from .data import CharTokenizer, bucket_batches, load_text, make_batch, pieces
from .generate import generate, greedy_full, sample_next
from .model import TinyGPT, decode_step, empty_cache, lm_loss

__all__ = [
    "CharTokenizer",
    "TinyGPT",
    "attention",
    "bucket_batches",
    "decode_step",
    "empty_cache",
    "generate",
    "generate_batch",
    "greedy_full",
    "lm_loss",
    "load_text",
    "make_batch",
    "pieces",
    "prefill",
    "sample_next",
]
