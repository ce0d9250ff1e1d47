"""Chapter 4: GPU kernels with Numba CUDA, runnable without a GPU.

The ``cuda`` device (``tensor.to("cuda")``) is served by :mod:`minitorch.cuda.backend`,
imported on first use (see ``backends.base.LAZY``). Its kernels are the chapter's
exercises (:mod:`minitorch.cuda.kernels`), compiled by ``numba.cuda.jit``.

Without a GPU, Numba's CUDA *simulator* runs every CUDA thread in Python.
It must be chosen before ``numba.cuda`` is imported, so this package sets
``NUMBA_ENABLE_CUDASIM=1`` itself when it finds no NVIDIA GPU (no ``/dev/nvidia0``
and no ``nvidia-smi`` on the PATH). The simulator is slow (tens of microseconds
per simulated thread), so the backend launches few threads there and relies on
grid-stride loops.

With an NVIDIA GPU you need, besides the pinned ``numba-cuda``, the NVIDIA driver
and the CUDA toolkit libraries (NVVM, libdevice, the runtime). The simplest way is
numba-cuda's extra for your CUDA major version, e.g. ``pip install "numba-cuda[cu12]"``
(or ``[cu13]`` for a CUDA 13 driver); check the numba-cuda installation guide for
the version that matches your driver (``nvidia-smi`` shows it). To force the
simulator on a GPU machine, set ``NUMBA_ENABLE_CUDASIM=1`` before starting Python.
"""

from __future__ import annotations

import os
import shutil
import sys


def gpu_present() -> bool:
    """True when an NVIDIA GPU seems to be present (checked without importing numba)."""
    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


def _choose_simulator() -> None:
    if gpu_present() or os.environ.get("NUMBA_ENABLE_CUDASIM") not in (None, ""):
        return
    if "numba.cuda" in sys.modules:
        from numba.core import config

        if not config.ENABLE_CUDASIM:
            raise RuntimeError(
                "minitorch.cuda: no NVIDIA GPU was found and numba.cuda was already imported "
                "without the CUDA simulator. Set NUMBA_ENABLE_CUDASIM=1 in the environment "
                "before Python starts (or before anything imports numba), e.g. "
                "`NUMBA_ENABLE_CUDASIM=1 python ...` or os.environ[...] at the top of a notebook"
            )
        return
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if "numba" in sys.modules:
        # numba.cuda reads numba's config, which was loaded with numba: refresh it.
        from numba.core import config

        config.reload_config()


_choose_simulator()
