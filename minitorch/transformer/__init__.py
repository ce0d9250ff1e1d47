"""Chapter 11: a small transformer, end to end: new ops, fused kernels, variable-length
training and generation, eager against compiled.

* ``ops``: embedding and its scatter-add gradient (11.1), layer norm and its
  backward (11.2), GELU, a causal mask; ``attention``: attention from registry ops (11.3);
* ``cuda``: fused softmax and layer-norm kernels graded by memory traffic (11.4, 11.5);
* ``data``: the text, a character tokenizer, bucketed variable-length batches (11.6);
* ``gpt``: the fused q/k/v projection (11.8), the model's forward (11.9), the loss (11.10);
* ``bpe``: a byte-pair tokenizer, its merges learnt (11.17) and applied (11.18);
* ``model``: ``TinyGPT`` and its key/value-cache decode step; ``generate``: sampling (11.7);
* ``flash``: tiled attention with an online softmax, Numba and CUDA kernels (11.19, 11.20);
* ``train``: the learning-rate schedule (11.11), gradient clipping (11.12), AdamW (11.13),
  a model for a compute budget (11.14, open), ``train_lm`` and the FLOP counter;
* ``batched``: the prompt in one prefill pass (11.15), prompts of different lengths in one
  batch (11.16);
* ``measure``: the chapter's figures (eager against compiled training and decoding,
  traces, memory, ONNX, profiles).
"""

from . import (
    gpu_row,  # noqa: F401  (TinyGPT's row of chapter 9's table on cuda)
    ops,  # noqa: F401  (registers the chapter's ops)
    torch_row,  # noqa: F401  (TinyGPT's rows of compile/vs_torch.py)
)
from .attention import attention
from .batched import generate_batch, prefill
from .bpe import BPETokenizer, decode_bpe, encode_bpe, split_words, train_bpe
from .data import CharTokenizer, bucket_batches, load_text, make_batch, pieces
from .flash import flash_attention
from .generate import generate, greedy_full, sample_next
from .gpt import gpt_forward, merge_heads, project_qkv
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
    "BPETokenizer",
    "CharTokenizer",
    "TinyGPT",
    "attention",
    "bucket_batches",
    "decode_bpe",
    "decode_step",
    "encode_bpe",
    "empty_cache",
    "flash_attention",
    "generate",
    "gpt_forward",
    "generate_batch",
    "greedy_full",
    "lm_loss",
    "load_text",
    "make_batch",
    "merge_heads",
    "pieces",
    "project_qkv",
    "prefill",
    "sample_next",
    "split_words",
    "train_bpe",
]
