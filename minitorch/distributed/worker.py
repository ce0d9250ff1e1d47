"""One rank under ``mpiexec``: ``python -m minitorch.distributed.worker module:function DIR``.

Calls ``function(comm, **args)`` with the arguments pickled in ``DIR/args.pkl`` and
writes ``(True, result)`` or ``(False, traceback)`` to ``DIR/rank<r>.pkl``. A rank that
raises aborts the others (they would otherwise wait for its messages forever).
"""

from __future__ import annotations

import importlib
import pickle
import sys
import traceback
from pathlib import Path


def main(target: str, folder: str) -> None:
    from .comm import world

    comm = world()
    out = Path(folder, f"rank{comm.rank}.pkl")
    try:
        module, name = target.split(":")
        fn = getattr(importlib.import_module(module), name)
        args = pickle.loads(Path(folder, "args.pkl").read_bytes())
        out.write_bytes(pickle.dumps((True, fn(comm, **args))))
    except BaseException:  # noqa: BLE001 - reported to the caller, then the others stopped
        out.write_bytes(pickle.dumps((False, traceback.format_exc())))
        sys.stdout.flush()
        comm._c.Abort(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
