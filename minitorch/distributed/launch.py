"""Start ``n`` ranks with ``mpiexec`` and collect what each returned.

``run(4, "pkg.mod:fn", {"x": 1})`` runs ``fn(comm, x=1)`` on ranks 0..3 (``comm`` a
``Comm`` over all of them) and returns the four results, in rank order. Arguments
and results travel as pickles through a scratch folder. A rank that raises makes
``run`` raise ``RankError`` with that rank's traceback; ranks still running when
``timeout`` (wall seconds) passes are killed, process group and all, and
``RankTimeout`` names them: a hung rank costs its caller the limit, never more.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


class RankError(RuntimeError):
    """A rank raised: the message holds its rank and traceback."""


class RankTimeout(RankError):
    """Ranks were still running at the time limit and were killed."""


def mpiexec() -> str:
    """``mpiexec`` beside this Python (the ``mpich`` wheel puts it there), else on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if not found:
        raise RankError("mpiexec not found: install the pinned mpi4py and mpich "
                        "(pip install -r requirements.txt)")  # fmt: skip
    return found


def rank_env() -> dict:
    """One thread per rank: ranks share the machine's cores, so extra threads only fight."""
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")  # fmt: skip
    # the ranks import what this process imports (a test's module, the repository)
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd()] + [p for p in sys.path if p])
    return env


def run(n: int, target: str, args: dict | None = None, timeout: float = 60.0) -> list:
    """Run ``target`` (``"module:function"``) on ``n`` ranks; each rank's return value."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"run: n={n!r} ranks; give a positive int")
    if ":" not in target:
        raise ValueError(f"run: target {target!r} is not 'module:function'")
    with tempfile.TemporaryDirectory(prefix="minitorch-ranks-") as tmp:
        Path(tmp, "args.pkl").write_bytes(pickle.dumps(args or {}))
        cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "minitorch.distributed.worker",
               target, tmp]  # fmt: skip
        proc = subprocess.Popen(cmd, env=rank_env(), start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            hung = [r for r in range(n) if not Path(tmp, f"rank{r}.pkl").exists()]
            raise RankTimeout(f"{target}: ranks {hung} of {n} still running after "
                              f"{timeout:g} s; killed") from None  # fmt: skip
        got = {r: pickle.loads(p.read_bytes()) for r in range(n)
               if (p := Path(tmp, f"rank{r}.pkl")).exists()}  # fmt: skip
        for r, (ok, value) in sorted(got.items()):  # the rank that raised, before those it stopped
            if not ok:
                raise RankError(f"{target}: rank {r} of {n} raised:\n{value}")
        results = []
        for r in range(n):
            if r not in got:
                tail = out.decode(errors="replace")[-3000:]
                raise RankError(f"{target}: rank {r} of {n} returned nothing "
                                f"(mpiexec exit {proc.returncode}):\n{tail}")  # fmt: skip
            results.append(got[r][1])
        return results
