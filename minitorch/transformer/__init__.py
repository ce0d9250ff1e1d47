"""Chapter 11: a small transformer, end to end: new ops, fused kernels, variable-length
training and generation, eager against compiled.

* ``ops``: embedding and its scatter-add gradient (11.1), layer norm and its
  backward (11.2), GELU, a causal mask; ``attention``: attention from registry ops (11.3);
* ``cuda``: fused softmax and layer-norm kernels graded by memory traffic (11.4, 11.5);
* ``data``: the text, a character tokenizer, bucketed variable-length batches (11.6);
* ``model``: ``TinyGPT`` and its key/value-cache decode step; ``generate``: sampling (11.7);
* ``train``: the learning-rate schedule (11.11), gradient clipping (11.12), AdamW (11.13),
  a model for a compute budget (11.14, open), ``train_lm`` and the FLOP counter;
* ``measure``: the chapter's figures (eager against compiled training and decoding,
  traces, memory, ONNX, profiles).
"""

from . import (
    gpu_row,  # noqa: F401  (TinyGPT's row of chapter 9's table on cuda)
    ops,  # noqa: F401  (registers the chapter's ops)
)
from .attention import attention
from .data import CharTokenizer, bucket_batches, load_text, make_batch, pieces
from .generate import generate, greedy_full, sample_next
from .model import TinyGPT, decode_step, empty_cache, lm_loss
from .train import AdamW, adamw_step, choose_config, clip_grads, lr_at, step_flops, train_lm

__all__ = [
    "AdamW",
    "adamw_step",
    "choose_config",
    "clip_grads",
    "lr_at",
    "step_flops",
    "train_lm",
    "CharTokenizer",
    "TinyGPT",
    "attention",
    "bucket_batches",
    "decode_step",
    "empty_cache",
    "generate",
    "greedy_full",
    "lm_loss",
    "load_text",
    "make_batch",
    "pieces",
    "sample_next",
]
