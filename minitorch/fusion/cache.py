"""The kernel cache: generated source as real files, named by a structural key.

Numba's ``cache=True`` only works for functions defined in a file it can find
again, so every generated kernel is written to ``<cache dir>/mt_<key>_<digest>.py``
and imported from there. A second process (or a second graph with the same
structure) imports the same file and Numba loads the machine code it saved
beside it: nothing is compiled again. The folder is ``kernels/`` in minitorch's one
cache folder (``MINITORCH_CACHE_DIR``, default ``~/.cache/minitorch``; ``core/cachedir.py``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

from ..core import cachedir

# what happened to each kernel function on its first call, for explain and the dumps;
# "shared": a group whose function another group of the same structure compiled or loaded
STATS = {"compiled": 0, "loaded": 0, "shared": 0, "modules_written": 0}
_COUNTED: set = set()  # id of every kernel function counted in this process


def cache_dir() -> Path:
    return cachedir.folder("kernels")


def load(key: str, source: str):
    """Import the module ``mt_<key>_<source digest>`` from the cache folder (written if new).

    The structural key names what the kernel computes; the digest of the source
    tells apart two generators (the reference and yours) writing the same group.
    """
    name = f"mt_{key}_{hashlib.sha256(source.encode()).hexdigest()[:6]}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    path = cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text(encoding="utf-8") != source:
        # write then rename: a process importing it never sees half a file
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source, encoding="utf-8")
        os.replace(tmp, path)
        STATS["modules_written"] += 1
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def count_first_call(fn) -> str:
    """After ``fn``'s first call: was its machine code ``"compiled"``, ``"loaded"`` or
    ``"shared"`` (the function was already called for another group)?"""
    stats = getattr(fn, "stats", None)
    if stats is None:
        return "compiled"
    if id(fn) in _COUNTED:
        how = "shared"
    else:
        _COUNTED.add(id(fn))
        how = "loaded" if sum(stats.cache_hits.values()) else "compiled"
    STATS[how] += 1
    return how
