"""Chapter 11: a small transformer, end to end: new ops, fused kernels, variable-length
training and generation, eager against compiled.

* ``ops``: embedding and its scatter-add gradient (11.1), layer norm and its
  backward (11.2), GELU, a causal mask; ``attention``: attention from registry ops (11.3);
* ``cuda``: fused softmax and layer-norm kernels graded by memory traffic (11.4, 11.5);
* ``data``: the text, a character tokenizer, bucketed variable-length batches (11.6);
* ``bpe``: a byte-pair tokenizer, its merges learnt (11.17) and applied (11.18);
* ``model``: ``TinyGPT`` and its key/value-cache decode step; ``generate``: sampling (11.7);
* ``measure``: the chapter's figures (eager against compiled training and decoding,
  traces, memory, ONNX, profiles).
"""

from . import (
    gpu_row,  # noqa: F401  (TinyGPT's row of chapter 9's table on cuda)
    ops,  # noqa: F401  (registers the chapter's ops)
)
from .attention import attention
from .bpe import BPETokenizer, decode_bpe, encode_bpe, split_words, train_bpe
from .data import CharTokenizer, bucket_batches, load_text, make_batch, pieces
from .generate import generate, greedy_full, sample_next
from .model import TinyGPT, decode_step, empty_cache, lm_loss

__all__ = [
    "BPETokenizer",
    "CharTokenizer",
    "TinyGPT",
    "attention",
    "bucket_batches",
    "decode_bpe",
    "decode_step",
    "encode_bpe",
    "empty_cache",
    "generate",
    "greedy_full",
    "lm_loss",
    "load_text",
    "make_batch",
    "pieces",
    "sample_next",
    "split_words",
    "train_bpe",
]
