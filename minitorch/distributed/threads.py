"""Ranks as threads of one process, with MPI's message semantics: what graded tests run.

``run_threads(4, fn, {"x": 1})`` runs ``fn(comm, x=1)`` on four threads, each with a
``ThreadComm`` offering ``Comm``'s interface, and returns the results in rank order.
The grader's sandbox refuses to create processes and installs a learner's function
in its own process only, so graded tests cannot use ``mpiexec``; the same function
runs unchanged on ``launch.run``'s MPI ranks.

The semantics are MPI's strict reading, so code that works here works on MPI:
a send completes only when a matching receive takes it (no buffering to lean on:
two ranks that both ``send`` first wait forever), messages between two ranks with
one tag arrive in order, a receive's buffer must have the message's size and dtype,
and the sender's buffer is read when the message is matched (a buffer changed
before ``wait()`` sends the change). One rank runs at a time and hands over only
where it waits (for a message, a collective, or a ``test()`` that finds nothing),
so the ranks, which share the process's state (grad mode, tracing, caches), each
reach their waits as a rank of their own would. When every live rank waits on the others,
``Deadlock`` names what each waits for, at once instead of at the time limit.
"""

from __future__ import annotations

import threading
import time
import traceback

import numpy as np

from ..core.errors import OpError
from .comm import Request, _check
from .launch import RankError, RankTimeout


class Deadlock(RankError):
    """Every rank still running waits for a message or collective no rank will provide."""


class _Stop(BaseException):
    """Raised in a waiting rank when the run is over (another rank failed, or time is up)."""


class _Op:
    """A posted send or receive; ``done`` once matched."""

    def __init__(self, kind, rank, peer, tag, buf):
        self.kind, self.rank, self.peer, self.tag, self.buf = kind, rank, peer, tag, buf
        self.done, self.error = False, None  # error: a bad message, raised in the receiver

    def describe(self) -> str:
        way = "to" if self.kind == "send" else "from"
        return f"{self.kind} {way} rank {self.peer} (tag {self.tag}, {self.buf.nbytes} bytes)"


class _World:
    def __init__(self, n: int, deadline: float):
        self.n, self.deadline = n, deadline
        self.cond = threading.Condition()
        self.sends: list[_Op] = []  # posted and not yet matched, in posting order
        self.recvs: list[_Op] = []
        self.waiting: dict = {}  # rank -> (what it waits for, whether that has come)
        self.live = n
        self.stop: str | None = None  # why every waiting rank must stop
        self.coll: dict = {"gen": 0, "vals": {}}

    def match(self) -> None:
        """Pair posted receives with the earliest posted send of their source and tag."""
        for r in list(self.recvs):
            s = next(
                (s for s in self.sends if (s.rank, s.peer, s.tag) == (r.peer, r.rank, r.tag)), None
            )
            if s is None:
                continue
            self.sends.remove(s)
            self.recvs.remove(r)
            if s.buf.nbytes != r.buf.nbytes or s.buf.dtype != r.buf.dtype:
                r.error = OpError(
                    "recv", f"rank {r.rank} got {s.buf.dtype}[{s.buf.size}] from rank {s.rank} "
                    f"into a buf of {r.buf.dtype}[{r.buf.size}]",
                    "receive into a buffer of the message's dtype and size")  # fmt: skip
            else:
                r.buf.reshape(-1)[...] = s.buf.reshape(-1)  # read the sender's buffer now
            s.done = r.done = True
        self.cond.notify_all()

    def wait(self, rank: int, what: str, ready) -> None:
        """Block ``rank`` until ``ready()``; detect a deadlock, a stop or the time limit."""
        self.waiting[rank] = (what, ready)
        try:
            while not ready():
                if self.stop:
                    raise _Stop(self.stop)
                # a rank whose wait is over but which has not woken yet is not stuck
                if len(self.waiting) == self.live and not any(
                    r() for _, r in self.waiting.values()
                ):
                    plan = "; ".join(f"rank {k} in {v[0]}" for k, v in sorted(self.waiting.items()))
                    self.stop = f"deadlock: {plan}"
                    self.cond.notify_all()
                    raise _Stop(self.stop)
                left = self.deadline - time.monotonic()
                if left <= 0:
                    self.stop = f"time: ranks {sorted(self.waiting)} still waiting"
                    self.cond.notify_all()
                    raise _Stop(self.stop)
                self.cond.wait(min(left, 1.0))
        finally:
            del self.waiting[rank]


class _Pending:
    """What ``Request`` wraps: mpi4py's ``Wait``/``Test`` over a posted operation."""

    def __init__(self, comm: ThreadComm, op: _Op):
        self.comm, self.op = comm, op

    def Test(self) -> bool:  # noqa: N802 - mpi4py's names
        with self.comm.world.cond:
            if not self.op.done:  # a rank polling in a loop hands the others their turn
                self.comm.world.cond.wait(0.001)
            return self.op.done

    def Wait(self) -> None:  # noqa: N802
        w = self.comm.world
        with w.cond:
            w.wait(self.comm.rank, self.op.describe(), lambda: self.op.done)
        if self.op.error is not None:
            raise self.op.error


class ThreadComm:
    """``Comm``'s interface between threads (see the module's docstring for its semantics)."""

    def __init__(self, world: _World, rank: int):
        self.world, self.rank, self.size = world, rank, world.n

    def _peer(self, op, name, peer) -> int:
        if not isinstance(peer, (int, np.integer)) or not 0 <= peer < self.size:
            raise OpError(op, f"{name}={peer!r} is not a rank of this communicator",
                          f"ranks are 0 .. {self.size - 1}")  # fmt: skip
        return int(peer)

    def _post(self, kind, buf, peer, tag) -> Request:
        op = _Op(kind, self.rank, peer, tag, buf)
        with self.world.cond:
            (self.world.sends if kind == "send" else self.world.recvs).append(op)
            self.world.match()
        return Request(_Pending(self, op))

    def isend(self, buf, dest, tag=0) -> Request:
        return self._post(
            "send", _check("isend", "buf", buf), self._peer("isend", "dest", dest), tag
        )

    def irecv(self, buf, source, tag=0) -> Request:
        return self._post(
            "recv", _check("irecv", "buf", buf), self._peer("irecv", "source", source), tag
        )

    def send(self, buf, dest, tag=0) -> None:
        self._post("send", _check("send", "buf", buf), self._peer("send", "dest", dest), tag).wait()

    def recv(self, buf, source, tag=0):
        self._post(
            "recv", _check("recv", "buf", buf), self._peer("recv", "source", source), tag
        ).wait()
        return buf

    def sendrecv(self, sendbuf, dest, recvbuf, source, tag=0):
        s = self._post("send", _check("sendrecv", "sendbuf", sendbuf),
                       self._peer("sendrecv", "dest", dest), tag)  # fmt: skip
        r = self._post("recv", _check("sendrecv", "recvbuf", recvbuf),
                       self._peer("sendrecv", "source", source), tag)  # fmt: skip
        r.wait()
        s.wait()
        return recvbuf

    def _collective(self, what: str, value):
        """Every rank's ``value`` in rank order, once all have arrived."""
        w = self.world
        with w.cond:
            c = w.coll
            gen = c["gen"]
            c["vals"][self.rank] = (what, value)
            if len(c["vals"]) == w.n:
                c["done"], c["vals"] = c["vals"], {}
                c["gen"] += 1
                w.cond.notify_all()
            w.wait(self.rank, what, lambda: c["gen"] != gen)
            got = c["done"]
        kinds = {k for k, _ in got.values()}
        if len(kinds) > 1:
            raise OpError(what, f"ranks called different collectives: {sorted(kinds)}",
                          "every rank calls the same collectives in the same order")  # fmt: skip
        return [got[r][1] for r in range(w.n)]

    def allreduce(self, buf):
        vals = self._collective("allreduce", _check("allreduce", "buf", buf).copy())
        out = vals[0].copy()
        for v in vals[1:]:
            out += v
        return out

    def iallreduce(self, buf, out):
        if _check("iallreduce", "out", out).shape != buf.shape or out.dtype != buf.dtype:
            raise OpError("iallreduce", f"out is {out.dtype}{out.shape}, buf {buf.dtype}{buf.shape}",
                          "give out the shape and dtype of buf")  # fmt: skip
        out[...] = self.allreduce(buf)  # completes at once: MPI allows it
        return Request(_Done())

    def barrier(self) -> None:
        self._collective("barrier", None)

    def bcast_object(self, obj, root=0):
        return self._collective("bcast_object", obj)[self._peer("bcast_object", "root", root)]

    def gather_object(self, obj, root=0):
        vals = self._collective("gather_object", obj)
        return vals if self.rank == self._peer("gather_object", "root", root) else None


class _Done:
    def Test(self):  # noqa: N802
        return True

    def Wait(self):  # noqa: N802
        pass


def run_threads(n: int, fn, args: dict | None = None, timeout: float = 30.0) -> list:
    """Run ``fn(comm, **args)`` on ``n`` thread ranks; each rank's return value, in rank order.

    A rank that raises makes this raise ``RankError`` with its traceback (the others
    are stopped at their next wait; a ``NotImplementedError``, a stub's, is raised as it is); ``Deadlock`` when all wait on each other;
    ``RankTimeout`` when ranks still wait at ``timeout`` seconds.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"run_threads: n={n!r} ranks; give a positive int")
    world = _World(n, time.monotonic() + timeout)
    results: list = [None] * n
    failed: dict[int, tuple] = {}

    def body(rank: int) -> None:
        try:
            with world.cond:  # the baton: one rank runs at a time, handing over at its waits
                results[rank] = fn(ThreadComm(world, rank), **(args or {}))
        except _Stop:
            pass
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            with world.cond:
                failed[rank] = (e, traceback.format_exc())
                world.stop = world.stop or f"rank {rank} raised"
        finally:
            with world.cond:
                world.live -= 1
                if world.waiting and len(world.waiting) == world.live:
                    world.cond.notify_all()  # those left may now be deadlocked
                world.cond.notify_all()

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, world.deadline - time.monotonic()) + 1.0)
    name = getattr(fn, "__name__", repr(fn))
    if failed:
        r = min(failed)
        exc, trace = failed[r]
        if isinstance(exc, NotImplementedError):  # a stub: say so, as a test in one process would
            exc.add_note(f"raised on rank {r} of {n}")
            raise exc
        raise RankError(f"{name}: rank {r} of {n} raised:\n{trace}")
    if any(t.is_alive() for t in threads) or (world.stop or "").startswith("time"):
        busy = [r for r, t in enumerate(threads) if t.is_alive()]
        raise RankTimeout(f"{name}: ranks {busy or sorted(world.waiting)} of {n} still running "
                          f"after {timeout:g} s")  # fmt: skip
    if world.stop:
        raise Deadlock(f"{name}: {world.stop}")
    return results
