"""The GPU starvation watch of a gload server, from Python.

``watch_report(addr)`` fetches one report of the server's watch (its Watch RPC): per GPU the SM utilisation over the
watch window (median, P10, share of time below 30%), memory-controller utilisation, PCIe and power; per client the
data-wait share, step time and queue depth; and the verdict — ``fed``, ``starved: data``, ``starved: not the loader``,
``no GPU visible`` or ``insufficient data`` — with its likely cause and usual fix. ``watch(addr)`` streams them.

``StepReporter(addr, client_id)`` sends the step timings of a training loop that does not take its batches from gload
(a plain ``torch.utils.data.DataLoader``, say) to the server's Report RPC, so that the watch can judge that loop too::

    with StepReporter("unix:///tmp/gload.sock", "baseline") as rep:
        for batch in timed(loader):   # measure the wait for each batch and the step after it
            ...
            rep.report(wait_s, step_s)

This module needs only grpcio and protobuf (no torch, no numpy). Times are in seconds.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from typing import Any, Dict, Iterator, Optional, Tuple, Union

import grpc

from ._channel import auth_token as _auth_token
from ._channel import open_channel, resolve
from ._proto import gload_pb2 as pb
from ._proto import gload_pb2_grpc as pb_grpc

log = logging.getLogger("gload")

__all__ = ["watch_report", "watch", "StepReporter", "VERDICTS"]

# The verdicts a report can carry (its "verdict" field; "lost" appears for single GPUs only).
VERDICTS = ("fed", "starved: data", "starved: not the loader", "no GPU visible", "insufficient data")

_FORMATS = ("text", "json", "dict")


def _channel(addr: Optional[str], token: Optional[str]) -> Tuple[str, grpc.Channel]:
    """(the address, a channel to it sending the bearer token) — see :func:`gload.default_address`."""
    addr, target = resolve(addr)
    return addr, open_channel(target, _auth_token(token))


def _error(err: grpc.RpcError, addr: str, what: str) -> Exception:
    """The exception for a failed call: the client's own error classes where they are importable."""
    try:
        from .errors import translate
    except ImportError:  # pragma: no cover - the package always ships errors.py
        return ConnectionError(f"{what} at {addr}: {err}")
    return translate(err, addr, what)


def _convert(m: Any, fmt: str) -> Union[str, Dict[str, Any]]:
    if fmt == "text":
        return m.text
    if fmt == "json":
        return m.json
    return json.loads(m.json)


def watch_report(addr: Optional[str] = None, fmt: str = "text", timeout: float = 5.0, *,
                 auth_token: Optional[str] = None) -> Union[str, Dict[str, Any]]:
    """One report of the watch of the server at ``addr``.

    ``fmt`` "text" returns the table ``gload watch --once`` prints; "json" the report as a JSON string (the schema of
    loader/gpuwatch's Report: snake_case keys, utilisations in percent, shares in [0, 1]); "dict" that JSON parsed.
    ``timeout`` bounds the call in seconds; ``addr`` and ``auth_token`` as in :class:`gload.Loader`. Raises
    ``gload.errors.ServerUnavailable`` (a ``ConnectionError``) when the server cannot be reached,
    ``gload.errors.Unauthenticated`` (a ``PermissionError``) without its token, and ``NotImplementedError`` when it is a gload serve without the watch.
    """
    if fmt not in _FORMATS:
        raise ValueError(f"fmt {fmt!r}: want one of {', '.join(_FORMATS)}")
    addr, ch = _channel(addr, auth_token)
    with ch:
        stub = pb_grpc.LoaderStub(ch)
        try:
            for m in stub.Watch(pb.WatchRequest(once=True), timeout=timeout):
                return _convert(m, fmt)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise NotImplementedError(f"gload server {addr} has no Watch RPC (an older gload serve)") from None
            raise _error(e, addr, "watch") from None
    raise ConnectionError(f"gload server {addr} ended the watch without a report")


def watch(addr: Optional[str] = None, interval: float = 1.0, fmt: str = "dict", *,
          auth_token: Optional[str] = None) -> Iterator[Union[str, Dict[str, Any]]]:
    """Yields a report of the watch every ``interval`` seconds until the caller stops iterating (or the server
    stops: then it raises, as :func:`watch_report` does). ``fmt`` as in :func:`watch_report`."""
    if fmt not in _FORMATS:
        raise ValueError(f"fmt {fmt!r}: want one of {', '.join(_FORMATS)}")
    if not interval > 0:
        raise ValueError(f"interval {interval!r}: want seconds > 0")
    addr, ch = _channel(addr, auth_token)
    call = pb_grpc.LoaderStub(ch).Watch(pb.WatchRequest(interval_s=float(interval)))
    try:
        for m in call:
            yield _convert(m, fmt)
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.CANCELLED:
            raise _error(e, addr, "watch") from None
    finally:
        call.cancel()
        ch.close()


_CLOSE = object()


class StepReporter:
    """Sends a training loop's step timings to the gload server at ``addr`` under ``client_id`` (the Report RPC), in
    the background: :meth:`report` never blocks the loop and never raises for the server's sake.

    ``report(wait_s, step_s)``: how long the loop waited for its batch, and how long the step took after it (both
    seconds). Up to ``max_pending`` reports wait to be sent; beyond that they are dropped and counted
    (:attr:`dropped`). If the server cannot be reached the reporter logs one warning and drops what follows.
    ``close()`` ends the stream and returns the number of steps the server acknowledged (None if it could not be
    told). Make the reporter after any ``fork`` (DataLoader workers): a gRPC channel does not survive one.
    """

    def __init__(self, addr: Optional[str], client_id: str, max_pending: int = 4096, *,
                 auth_token: Optional[str] = None) -> None:
        if not client_id:
            raise ValueError("client_id: a name for this loop is required")
        if max_pending < 1:
            raise ValueError(f"max_pending {max_pending!r}: want >= 1")
        self.addr, self._channel = _channel(addr, auth_token)
        self.client_id = client_id
        self.dropped = 0
        self.sent = 0
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=max_pending)
        self._closed = False
        self._failed: Optional[BaseException] = None
        self._lock = threading.Lock()
        stub = pb_grpc.LoaderStub(self._channel)
        self._future = stub.Report.future(self._messages(), wait_for_ready=True, timeout=None)
        self._future.add_done_callback(self._done)

    def _messages(self) -> Iterator[Any]:
        """The request stream: the opening message naming the client, then every queued step."""
        yield pb.ClientReport(client_id=self.client_id)
        while True:
            m = self._queue.get()
            if m is _CLOSE:
                return
            yield m

    def _done(self, fut: Any) -> None:
        """Called by gRPC when the call ends; an early end is a failure to warn about once."""
        exc = fut.exception() if not fut.cancelled() else None
        with self._lock:
            closed = self._closed
            if exc is not None:
                self._failed = exc
        if exc is not None and not closed:
            detail = exc.details() if hasattr(exc, "details") else exc
            log.warning("gload: step reports to %s (client %s) stopped: %s", self.addr, self.client_id, detail)

    def report(self, wait_s: float, step_s: float, seq: int = 0) -> None:
        """Queues one step: ``wait_s`` seconds waiting for the batch, ``step_s`` seconds of step after it."""
        if self._closed or self._failed is not None:
            self.dropped += 1
            return
        m = pb.ClientReport(step=pb.StepReport(
            seq=max(int(seq), 0), wait_us=max(int(wait_s * 1e6), 0), step_us=max(int(step_s * 1e6), 0),
            client_time_unix_us=int(time.time() * 1e6)))
        try:
            self._queue.put_nowait(m)
            self.sent += 1
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 5.0) -> Optional[int]:
        """Ends the stream, waiting at most ``timeout`` seconds for the server's summary; returns the number of
        steps it received (None if the stream failed or did not end in time)."""
        with self._lock:
            if self._closed:
                return None
            self._closed = True
        steps: Optional[int] = None
        try:
            self._queue.put(_CLOSE, timeout=timeout)
            steps = int(self._future.result(timeout=timeout).steps)
        except (queue.Full, grpc.FutureTimeoutError, grpc.RpcError, grpc.FutureCancelledError):
            self._future.cancel()
        finally:
            self._channel.close()
        return steps

    def __enter__(self) -> "StepReporter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"StepReporter({self.addr!r}, {self.client_id!r}, sent={self.sent}, dropped={self.dropped}, "
                f"failed={self._failed is not None})")
