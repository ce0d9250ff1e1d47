"""Without a GPU, chapter 4 runs on Numba's CUDA simulator, chosen before numba.cuda loads."""

import os
import shutil

if not (os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi")):
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import minitorch.cuda  # noqa: E402,F401  (refreshes numba's config if numba is already loaded)
