"""The communicator: what a rank can say to another, backed by MPI through ``mpi4py``.

Buffers are contiguous numpy arrays of float32, float64, int32 or int64: MPI
reads and writes them in place, with no pickling. ``CountingComm`` wraps any
``Comm`` and keeps a log of every message (bytes, peer, start and end times on
this rank's clock), which is what the graded tests of bytes per rank and the
book's per-rank timelines read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import OpError

DTYPES = (np.float32, np.float64, np.int32, np.int64)


def _mpi():
    from mpi4py import MPI  # imported late: chapters 1-11 never need MPI

    return MPI


def _check(op: str, name: str, buf) -> np.ndarray:
    if not isinstance(buf, np.ndarray):
        raise OpError(op, f"{name} is a {type(buf).__name__}, not a numpy array",
                      "pass a contiguous numpy array (np.ascontiguousarray(x))")  # fmt: skip
    if buf.dtype.type not in DTYPES:
        raise OpError(op, f"{name} has dtype {buf.dtype}",
                      "use float32, float64, int32 or int64")  # fmt: skip
    if not buf.flags.c_contiguous:
        raise OpError(op, f"{name} is not contiguous (strides {buf.strides})",
                      "MPI reads memory in order: pass np.ascontiguousarray(x) or a slice "
                      "of a 1-D array")  # fmt: skip
    return buf


class Request:
    """A message in flight: ``wait()`` blocks until it has completed, ``test()`` asks."""

    def __init__(self, req, on_done=None):
        self._req, self._on_done, self.done = req, on_done, False

    def _finish(self):
        if not self.done:
            self.done = True
            if self._on_done is not None:
                self._on_done()

    def wait(self) -> None:
        if not self.done:
            self._req.Wait()
            self._finish()

    def test(self) -> bool:
        if not self.done and self._req.Test():
            self._finish()
        return self.done


def wait_all(requests) -> None:
    for r in requests:
        r.wait()


class Comm:
    """Point-to-point messages between ranks ``0 .. size - 1``, and MPI's collectives."""

    def __init__(self, mpi_comm=None):
        self._c = mpi_comm if mpi_comm is not None else _mpi().COMM_WORLD
        self.rank, self.size = self._c.Get_rank(), self._c.Get_size()

    def _peer(self, op: str, name: str, peer) -> int:
        if not isinstance(peer, (int, np.integer)) or not 0 <= peer < self.size:
            raise OpError(op, f"{name}={peer!r} is not a rank of this communicator",
                          f"ranks are 0 .. {self.size - 1}")  # fmt: skip
        return int(peer)

    # blocking
    def send(self, buf: np.ndarray, dest: int, tag: int = 0) -> None:
        self._c.Send(_check("send", "buf", buf), dest=self._peer("send", "dest", dest), tag=tag)

    def recv(self, buf: np.ndarray, source: int, tag: int = 0) -> np.ndarray:
        """Receive into ``buf`` (its size is the message's); returns ``buf``."""
        self._c.Recv(
            _check("recv", "buf", buf), source=self._peer("recv", "source", source), tag=tag
        )
        return buf

    def sendrecv(self, sendbuf, dest: int, recvbuf, source: int, tag: int = 0) -> np.ndarray:
        """Send to ``dest`` and receive from ``source`` at once (no deadlock in a ring)."""
        self._c.Sendrecv(_check("sendrecv", "sendbuf", sendbuf), self._peer("sendrecv", "dest", dest),
                         tag, _check("sendrecv", "recvbuf", recvbuf),
                         self._peer("sendrecv", "source", source), tag)  # fmt: skip
        return recvbuf

    # non-blocking: the buffer must not be touched until the request is waited on
    def isend(self, buf: np.ndarray, dest: int, tag: int = 0) -> Request:
        return Request(
            self._c.Isend(_check("isend", "buf", buf), self._peer("isend", "dest", dest), tag)
        )

    def irecv(self, buf: np.ndarray, source: int, tag: int = 0) -> Request:
        return Request(
            self._c.Irecv(_check("irecv", "buf", buf), self._peer("irecv", "source", source), tag)
        )

    # MPI's own collectives: the baseline the chapter's algorithms are compared with
    def allreduce(self, buf: np.ndarray) -> np.ndarray:
        """The elementwise sum of every rank's ``buf``, by MPI's ``Allreduce`` (a new array)."""
        out = np.empty_like(_check("allreduce", "buf", buf))
        self._c.Allreduce(buf, out)
        return out

    def iallreduce(self, buf: np.ndarray, out: np.ndarray) -> Request:
        """Non-blocking ``Allreduce`` of ``buf`` into ``out`` (same shape and dtype)."""
        _check("iallreduce", "buf", buf), _check("iallreduce", "out", out)
        if out.shape != buf.shape or out.dtype != buf.dtype:
            raise OpError("iallreduce", f"out is {out.dtype}{out.shape}, buf {buf.dtype}{buf.shape}",
                          "give out the shape and dtype of buf")  # fmt: skip
        return Request(self._c.Iallreduce(buf, out))

    def barrier(self) -> None:
        self._c.Barrier()

    def bcast_object(self, obj, root: int = 0):
        return self._c.bcast(obj, root=self._peer("bcast_object", "root", root))

    def gather_object(self, obj, root: int = 0):
        """Every rank's ``obj`` in a list on ``root`` (``None`` elsewhere)."""
        return self._c.gather(obj, root=self._peer("gather_object", "root", root))


def world() -> Comm:
    """All the ranks ``mpiexec`` started (one rank when run without it)."""
    return Comm()


@dataclass
class Message:
    kind: str  # send, recv, allreduce
    peer: int  # -1 for a collective
    nbytes: int
    start: float  # time.perf_counter() on this rank
    end: float | None = None


@dataclass
class CountingComm:
    """A ``Comm`` that logs every message: ``bytes_sent``, ``messages_sent``, ``log``.

    Blocking calls are logged when they return; non-blocking ones when posted,
    and their end time when waited on. MPI's collectives are logged as one
    ``allreduce`` entry with the buffer's size (their internal traffic is MPI's).
    """

    inner: Comm
    log: list = field(default_factory=list)

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def size(self) -> int:
        return self.inner.size

    @property
    def bytes_sent(self) -> int:
        return sum(m.nbytes for m in self.log if m.kind == "send")

    @property
    def messages_sent(self) -> int:
        return sum(1 for m in self.log if m.kind == "send")

    @property
    def bytes_received(self) -> int:
        return sum(m.nbytes for m in self.log if m.kind == "recv")

    def _timed(self, kind, peer, nbytes, fn):
        m = Message(kind, peer, nbytes, time.perf_counter())
        out = fn()
        m.end = time.perf_counter()
        self.log.append(m)
        return out

    def _posted(self, kind, peer, nbytes, req: Request) -> Request:
        m = Message(kind, peer, nbytes, time.perf_counter())
        self.log.append(m)
        inner_done = req._on_done

        def done():
            m.end = time.perf_counter()
            if inner_done is not None:
                inner_done()

        req._on_done = done
        return req

    def send(self, buf, dest, tag=0):
        return self._timed("send", dest, buf.nbytes, lambda: self.inner.send(buf, dest, tag))

    def recv(self, buf, source, tag=0):
        return self._timed("recv", source, buf.nbytes, lambda: self.inner.recv(buf, source, tag))

    def sendrecv(self, sendbuf, dest, recvbuf, source, tag=0):
        m_s = Message("send", dest, sendbuf.nbytes, time.perf_counter())
        out = self.inner.sendrecv(sendbuf, dest, recvbuf, source, tag)
        m_s.end = time.perf_counter()
        self.log += [m_s, Message("recv", source, recvbuf.nbytes, m_s.start, m_s.end)]
        return out

    def isend(self, buf, dest, tag=0):
        return self._posted("send", dest, buf.nbytes, self.inner.isend(buf, dest, tag))

    def irecv(self, buf, source, tag=0):
        return self._posted("recv", source, buf.nbytes, self.inner.irecv(buf, source, tag))

    def allreduce(self, buf):
        return self._timed("allreduce", -1, buf.nbytes, lambda: self.inner.allreduce(buf))

    def iallreduce(self, buf, out):
        return self._posted("allreduce", -1, buf.nbytes, self.inner.iallreduce(buf, out))

    def barrier(self):
        self.inner.barrier()

    def bcast_object(self, obj, root=0):
        return self.inner.bcast_object(obj, root)

    def gather_object(self, obj, root=0):
        return self.inner.gather_object(obj, root)
