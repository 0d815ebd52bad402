"""One consumer's batch stream: the bidirectional Batches call, a reader thread that converts batches as they arrive
(so that a ready batch costs the training loop only a queue get), and the client's acks and step reports."""

from __future__ import annotations

import logging
import queue
import struct
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, Optional, Union

import grpc

from . import _futex, _native
from ._convert import Converter
from ._proto import gload_pb2 as pb
from ._ring import HEADER_BYTES, HEADER_START, SERVER_WAITING, Ring
from .errors import ProtocolError, ServerUnavailable, UntrustedServer, translate

log = logging.getLogger("gload")

# Items the reader thread queues besides converted batches.
_END = object()


class _Failure:
    """The stream failed: ``err`` is the client's exception, ``retry`` says whether reconnecting may help."""

    def __init__(self, err: BaseException, retry: bool) -> None:
        self.err = err
        self.retry = retry


class Ready:
    """A converted batch waiting to be handed out, with what its ack needs."""

    __slots__ = ("data", "seq", "slot", "rank_step", "global_index")

    def __init__(self, data: Dict[str, Any], seq: int, slot: int, rank_step: int, global_index: int) -> None:
        self.data = data
        self.seq = seq
        self.slot = slot
        self.rank_step = rank_step
        self.global_index = global_index

    @classmethod
    def of(cls, data: Dict[str, Any], b: Any) -> "Ready":
        """The Ready of batch b (a pb.Batch or a SlotHeader)."""
        return cls(data, b.seq, b.slot, b.rank_step, b.global_index)


class SlotHeader:
    """A batch announced in the ring's control region (the doorbell hand-off): the fields of a ``pb.Batch`` that
    the converter reads, with the buffers in the slot. ``words`` are the header's first six words (sequence,
    global index, rank step, rows | length << 32, pieces | cu_len << 32, trained tokens); ``shape_key`` the two
    that fix the batch's buffers in the slot."""

    __slots__ = ("seq", "slot", "global_index", "rank_step", "rows", "length", "pieces", "cu_len", "trained_tokens",
                 "shape_key")

    def __init__(self, seq: int, slot: int, words: "tuple[int, ...]") -> None:
        self.seq = seq
        self.slot = slot
        _, self.global_index, self.rank_step, w3, w4, self.trained_tokens = words
        self.rows, self.length = w3 & 0xFFFFFFFF, w3 >> 32
        self.pieces, self.cu_len = w4 & 0xFFFFFFFF, w4 >> 32
        self.shape_key = (slot, w3, w4)


# A slot's header as the client reads it (loader/shm/doorbell.go: little-endian uint64 words, written one atomic
# store each). Native formats ("@"): struct reads each field with one aligned load (the standard "<" formats
# assemble it byte by byte, which a concurrent store can tear). Only reads: struct's pack_into zeroes its target
# before it stores the fields, so a peer can see a written word pass through 0 — the released word is stored by
# numpy (one 8-byte store).
_NATIVE = "@" if sys.byteorder == "little" else "<"
_HEADER = struct.Struct(_NATIVE + "6Q")
_WORD = struct.Struct(_NATIVE + "Q")
_WAKE_AT = struct.Struct(_NATIVE + "I")


# Doorbell waits: check the slot's word, spin a little (yielding the GIL), then sleep on the word in a futex that the
# server wakes when it publishes (plain sleeps where futexes are missing), with timeouts growing to _SLEEP_MAX_S; the
# stream's queue (failures, the end) is looked at on every round.
_SPIN_S = 50e-6
_SLEEP_MIN_S = 20e-6
_SLEEP_MAX_S = 1e-3
# Coalesced step reports (doorbell streams): one message per _REPORT_EVERY_S, or per this many steps. Each message
# wakes gRPC's sending thread (a futex wake inside next(), then that thread wants the GIL): at a 1 ms step a report
# every 32 steps had put that cost into 3% of the calls, above a p99.
_REPORT_STEPS = 1024
_REPORT_EVERY_S = 0.25


Item = Union[Ready, _Failure, object]

_RETRYABLE = {grpc.StatusCode.UNAVAILABLE}


class Stream:
    """An open Batches stream. ``get`` returns the next Ready batch, raises on failure, and returns None at the end.
    Everything but ``get``/``ack``/``report``/``close`` runs on the reader thread."""

    def __init__(
        self,
        method: Callable[..., Any],
        open_msg: "pb.Open",
        addr: str,
        open_timeout: Optional[float],
        make_converter: Callable[[Optional[Ring], Optional["pb.SlotLayout"]], Converter],
        server_uid: Optional[Callable[[], int]] = None,
    ) -> None:
        self.addr = addr
        self._server_uid = server_uid  # the uid a ring must belong to (None: ours)
        self.opened: Optional["pb.Opened"] = None
        self.ring: Optional[Ring] = None
        self.converter: Optional[Converter] = None
        self._make_converter = make_converter
        self._out: "queue.SimpleQueue[Any]" = queue.SimpleQueue()  # messages or ("ack"|"report", ...) tuples
        self._in: "queue.SimpleQueue[Item]" = queue.SimpleQueue()
        self._opened_event = threading.Event()
        self._closed = False
        self.doorbell = False  # batches announced in the ring (set from Opened.control_offset)
        self.on_caller_thread = False  # doorbell without a ring reader: take() serves next() directly
        self._released: Any = None  # doorbell: the ring's released word (numpy, one 8-byte store per release)
        self._next_seq = 0
        # CUDA doorbell streams: a thread takes batches from the ring, copies them to the device (a host wait for
        # the copy there, not in the training loop), returns the slot and queues the batch.
        self._ring_reader: Optional[threading.Thread] = None
        # Doorbell streams the native copier serves (gload/_native.py): its thread converts batches ahead, with no
        # Python in it; made on the first take() (on the iterating thread, whose CUDA stream the batches join).
        self.native = False
        self.native_why = ""  # why a doorbell stream is not served by it ('' when it is)
        self._copier: Optional[_native.Copier] = None
        self._copier_lock = threading.Lock()  # its making (first take) against close() from another thread
        # zero_copy doorbell streams: the batch handed out last, whose slot goes back at the next get().
        self._held: Optional[int] = None
        self._grpc_ended = False
        self._failed = False
        self._report_n = 0
        self._report_wait = 0.0
        self._report_step = 0.0
        self._report_at = 0.0
        self._out.put(pb.ClientMessage(open=open_msg))
        self._call = method(self._requests())
        self._reader = threading.Thread(target=self._read, name="gload-reader", daemon=True)
        self._reader.start()
        if not self._opened_event.wait(open_timeout):
            self.close()
            raise ServerUnavailable(f"gload server {addr}: no answer to open within {open_timeout} s")
        if self.opened is None:
            item = self._in.get()
            self.close()
            assert isinstance(item, _Failure)
            raise item.err

    def _requests(self) -> Iterator["pb.ClientMessage"]:
        # Runs on gRPC's sending thread: messages are built here, off the iterating thread.
        while True:
            m = self._out.get()
            if m is None:
                return
            if isinstance(m, tuple):
                if m[0] == "ack":
                    m = pb.ClientMessage(ack=pb.Ack(seq=m[1], slot=m[2]))
                else:
                    _, seq, wait_s, step_s, now, steps = m
                    m = pb.ClientMessage(report=pb.StepReport(
                        seq=seq, wait_us=int(wait_s * 1e6), step_us=int(step_s * 1e6),
                        client_time_unix_us=int(now * 1e6), steps=steps if steps > 1 else 0))
            yield m

    def _read(self) -> None:
        try:
            for msg in self._call:
                kind = msg.WhichOneof("msg")
                if kind == "batch":
                    if self.converter is None:
                        raise ProtocolError("batch before opened")
                    data = self.converter.convert(msg.batch)
                    self._in.put(Ready.of(data, msg.batch))
                elif kind == "opened":
                    if self.opened is not None:
                        raise ProtocolError("opened sent twice")
                    self._on_opened(msg.opened)
                elif kind == "end":
                    self._out.put(None)  # close our side: the call then ends with OK
                    if self._ring_reader is not None:
                        self._grpc_ended = True  # the ring reader queues the end after the last batch
                    else:
                        self._in.put(_END)
                    return
                else:
                    raise ProtocolError(f"unexpected server message {kind!r}")
            raise ProtocolError("stream ended without its end message")
        except grpc.RpcError as e:
            if self._closed and e.code() == grpc.StatusCode.CANCELLED:
                return
            self._fail(translate(e, self.addr, "batches"), e.code() in _RETRYABLE)
        except Exception as e:  # noqa: BLE001 - every failure reaches the iterating thread
            self._fail(e, False)

    def _on_opened(self, o: "pb.Opened") -> None:
        if o.shm_path:
            try:
                owner = self._server_uid() if self._server_uid is not None else None
                self.ring = Ring(o.shm_path, o.slots, o.slot_bytes, o.control_offset, o.control_bytes, owner)
            except FileNotFoundError as e:
                raise ProtocolError(
                    f"shm transport: ring {o.shm_path} announced by {self.addr} cannot be opened ({e}): the client "
                    "must run on the server's host; use transport='grpc' otherwise") from e
            except UntrustedServer:
                raise
            except PermissionError as e:
                raise ProtocolError(
                    f"shm transport: ring {o.shm_path} announced by {self.addr} is not readable ({e}): run the client "
                    "as the server's user, or use transport='grpc'") from e
        self.converter = self._make_converter(self.ring, o.layout if o.shm_path else None)
        self.converter.stored_labels = bool(o.labels)
        if len(o.source_offsets) > 0:
            import numpy as np

            self.converter.source_offsets = np.asarray(list(o.source_offsets), dtype=np.int64)
        self.doorbell = self.ring is not None and self.ring.headers is not None
        if self.doorbell:
            assert self.ring is not None and self.ring.headers is not None and self.ring.released is not None
            self._headers_addr = int(self.ring.headers.ctypes.data)
            self._released_addr = int(self.ring.released.ctypes.data)
            # The hot path reads headers with struct on the mapping itself (one call per header, no numpy scalars)
            # and stores the released word through numpy.
            self._slots_mm = self.ring.slots_mapping()
            self._ctl = self.ring.control_mapping()
            self._released = self.ring.released
            self._header_at = o.control_offset + HEADER_START
            self._nslots = o.slots
            self._batches = o.batches
            # Wake a sleeping server only when fewer than this many batches are announced ahead of the client:
            # otherwise its own timed poll (at most every 0.5 ms) sees the released slots in time, and next()
            # does not pay for a futex wake (microseconds; more in a VM) every half ring.
            self._low_water = max(1, o.slots // 2)
            self.native_why = _native.supports(self.converter)
            if not self.native_why:
                self.native = True
                self.on_caller_thread = True
            elif self.converter.cuda:
                self._ring_reader = threading.Thread(target=self._read_ring, name="gload-ring-reader", daemon=True)
            else:
                self.converter.zero_copy = self.converter.zero_copy_wanted
                self.on_caller_thread = True
        self.opened = o
        self._opened_event.set()
        if self._ring_reader is not None:
            self._ring_reader.start()

    def _fail(self, err: BaseException, retry: bool) -> None:
        self._failed = True
        self._out.put(None)
        self._in.put(_Failure(err, retry))
        self._opened_event.set()

    def get(self, timeout: Optional[float]) -> Optional[Ready]:
        """The next batch; None at the end of the stream. Raises queue.Empty on timeout and _Failure's error
        (with ``gload_retry`` set on it) when the stream failed."""
        if self.doorbell and self._ring_reader is None:
            return self._get_from_ring(timeout)
        item = self._in.get(timeout=timeout) if timeout is not None else self._in.get()
        if isinstance(item, Ready):
            return item
        if item is _END:
            self._in.put(_END)  # sticky
            return None
        assert isinstance(item, _Failure)
        self._in.put(item)  # sticky
        item.err.gload_retry = item.retry  # type: ignore[attr-defined]
        raise item.err

    def _get_from_ring(self, timeout: Optional[float]) -> Optional[Ready]:
        """Doorbell streams: the next batch straight from the ring, on the calling thread (no message, no thread
        hand-off): wait for its slot's sequence word, convert (copy out of the slot, or views with zero_copy),
        return."""
        r = self.take()
        if r is not None:
            return r
        seq = self._next_seq
        if seq >= self._batches:
            return self._get_failure_or_end(timeout)  # the end message follows the last batch's word at once
        if self.native:
            return self._wait_native(seq, timeout)
        self._wait_slot(seq, timeout)
        r = self.take()
        assert r is not None
        return r

    def _take_native(self) -> Optional[Ready]:
        """take() of a stream the native copier serves: batch seq if the copier has made it."""
        c = self._copier
        if c is None:
            with self._copier_lock:
                if self._closed:
                    raise ProtocolError(f"stream to {self.addr} is closed")
                assert self.converter is not None and self.ring is not None and self.opened is not None
                try:
                    c = self._copier = _native.Copier(self.converter, self.ring, self.opened.layout, self.opened)
                except ProtocolError as e:  # (nothing was taken from the ring yet)
                    # The Python conversion on this thread serves the stream (CUDA included: slower, the copy's
                    # host wait in next(), but whole).
                    log.warning("gload: %s; this stream is converted in Python", e)
                    self.native, self.native_why = False, str(e)
                    return self.take()
        seq = self._next_seq
        if seq >= self._batches:
            return None
        got = c.take(seq)
        if got is None:
            return None
        data, info = got
        self._next_seq = seq + 1
        conv = self.converter
        assert conv is not None
        if conv.stored_labels:
            conv._label_counts[id(data)] = (int(info[_native.I_TRAINED]), int(info[_native.I_REAL]))
        if c.sources:
            conv._source_counts[id(data)] = c.source_counts(info)
        return Ready(data, seq, seq % self._nslots, int(info[_native.I_RANK_STEP]), int(info[_native.I_GLOBAL]))

    def _wait_native(self, seq: int, timeout: Optional[float]) -> Ready:
        """Waits for the copier to make batch seq, looking at the stream's queue (failures, the end) every
        millisecond at most; queue.Empty at the timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        c = self._copier
        if c is None:
            raise ProtocolError(f"stream to {self.addr} is closed")
        while True:
            if not self._in.empty():
                self._get_failure_or_end(0)
            left = 1e-3 if deadline is None else min(1e-3, deadline - time.monotonic())
            if left <= 0:
                raise queue.Empty
            c.wait(seq, left)
            r = self._take_native()
            if r is not None:
                return r

    def take(self) -> Optional[Ready]:
        """Doorbell streams without a ring reader: the next batch if its slot already holds it, else None (not
        announced yet, or past the stream's last batch; the caller then waits with :meth:`get`). Releases the slot
        of a zero_copy batch handed out before."""
        if self.native:
            return self._take_native()
        held = self._held
        if held is not None:  # zero_copy: the last batch's views end here
            self._held = None
            self._release(held)
        seq = self._next_seq
        if seq >= self._batches:
            return None
        slot = seq % self._nslots
        at = self._header_at + slot * HEADER_BYTES
        words = _HEADER.unpack_from(self._slots_mm, at)
        if words[0] != seq + 1:
            return None
        conv = self.converter
        assert conv is not None
        data = conv.planned((slot, words[3], words[4])) if conv.zero_copy else None
        if data is None:
            data = conv.convert(SlotHeader(seq, slot, words))
        if _WORD.unpack_from(self._slots_mm, at)[0] != seq + 1:
            raise ProtocolError(f"ring {self.ring.path}: slot {slot} changed while batch {seq} was read")  # type: ignore[union-attr]
        self._next_seq = seq + 1
        return Ready(data, seq, slot, words[2], words[1])

    def _wait_slot(self, seq: int, timeout: Optional[float]) -> None:
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        pause = _SLEEP_MIN_S
        ring = self.ring
        assert ring is not None and ring.client_waiting is not None and ring.headers is not None
        words = ring.headers[seq % ring.slots]
        addr = self._headers_addr + (seq % ring.slots) * HEADER_BYTES
        while int(words[0]) != seq + 1:
            if not self._in.empty():
                self._get_failure_or_end(0)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise queue.Empty
            if now - start < _SPIN_S:
                time.sleep(0)
                continue
            nap = pause if deadline is None else min(pause, max(0.0, deadline - now))
            if _futex.AVAILABLE:
                ring.client_waiting[0] = 1
                seen = int(words[0])
                if seen != seq + 1:
                    _futex.sleep(addr, seen, nap)  # the kernel compares the word again before sleeping
                ring.client_waiting[0] = 0
            else:
                time.sleep(nap)
            pause = min(2 * pause, _SLEEP_MAX_S)

    def _get_failure_or_end(self, timeout: Optional[float]) -> Optional[Ready]:
        """Doorbell streams: what the stream's queue holds besides batches. A failure raises; the end message is
        only the end once every batch of the stream came through the ring (then None)."""
        try:
            item = self._in.get(timeout=timeout) if timeout != 0 else self._in.get_nowait()
        except queue.Empty:
            if timeout == 0:
                return None
            raise
        if isinstance(item, _Failure):
            self._in.put(item)  # sticky
            item.err.gload_retry = item.retry  # type: ignore[attr-defined]
            raise item.err
        if item is _END:
            self._in.put(_END)
            o = self.opened
            if o is not None and self._next_seq >= o.batches:
                return None
            if timeout == 0:
                time.sleep(_SLEEP_MIN_S)  # the end came before the word of the last batch was seen: look again
                return None
            raise ProtocolError(f"stream ended after {self._next_seq} of {o.batches if o else '?'} batches")
        raise ProtocolError(f"unexpected item on a doorbell stream: {item!r}")

    def ack(self, r: Ready) -> None:
        """Hands r's credit (and slot) back to the server."""
        if self.doorbell:
            if self.native:
                return  # (the copier returned the slot when its batch was made)
            if self.converter is not None and self.converter.zero_copy:
                self._held = r.seq  # its views are the caller's until the next get()
            elif self._ring_reader is None:  # (the ring reader returned the slot when its copy was done)
                self._release(r.seq)
            return
        self._out.put(("ack", r.seq, r.slot))

    def _read_ring(self) -> None:
        """CUDA doorbell streams, on their own thread: each batch from its slot, copied to the device on the
        converter's side stream (waiting for the copy here, so that the slot can go back at once), queued. The end
        is queued after the last batch; a failure of the stream, or its close, stops it."""
        o, ring, conv = self.opened, self.ring, self.converter
        assert o is not None and ring is not None and ring.headers is not None and conv is not None
        try:
            for seq in range(o.batches):
                slot = seq % ring.slots
                words = ring.headers[slot]
                if int(words[0]) != seq + 1 and not self._wait_slot_quietly(words, seq):
                    return
                b = SlotHeader(seq, slot, _HEADER.unpack_from(self._slots_mm, self._header_at + slot * HEADER_BYTES))
                if int(words[0]) != seq + 1:
                    raise ProtocolError(f"ring {ring.path}: slot {slot} changed while batch {seq} was read")
                data = conv.convert(b)
                self._release(seq)
                self._in.put(Ready.of(data, b))
            self._in.put(_END)
        except Exception as e:  # noqa: BLE001 - every failure reaches the iterating thread
            if not self._closed:
                self._fail(e, False)

    def _wait_slot_quietly(self, words: Any, seq: int) -> bool:
        """The ring reader's wait for batch seq's word: False when the stream failed or closed meanwhile; raises
        when the server ended the stream without announcing the batch."""
        ring = self.ring
        assert ring is not None and ring.client_waiting is not None
        addr = self._headers_addr + (seq % ring.slots) * HEADER_BYTES
        start = time.monotonic()
        pause = _SLEEP_MIN_S
        ended_seen = 0
        while int(words[0]) != seq + 1:
            if self._closed or self._failed:
                return False
            if self._grpc_ended:  # the end follows the last batch's word at once: look twice more, then fail
                ended_seen += 1
                if ended_seen > 2:
                    raise ProtocolError(f"stream ended after {seq} of {self.opened.batches if self.opened else '?'} "
                                        "batches")
            if time.monotonic() - start < _SPIN_S:
                time.sleep(0)
                continue
            if _futex.AVAILABLE:
                ring.client_waiting[0] = 1
                seen = int(words[0])
                if seen != seq + 1:
                    _futex.sleep(addr, seen, pause)
                ring.client_waiting[0] = 0
            else:
                time.sleep(pause)
            pause = min(2 * pause, _SLEEP_MAX_S)
        return True

    def _release(self, seq: int) -> None:
        """Stores the released count (every batch up to seq) and wakes the server if it sleeps waiting for it and
        the batches announced ahead of the client run low."""
        n = seq + 1  # batches are released in stream order
        self._released[0] = n
        wake_at = _WAKE_AT.unpack_from(self._ctl, SERVER_WAITING)[0]  # the server sleeps until the count reaches this
        if not wake_at or ((n - wake_at) & 0xFFFFFFFF) >= 0x80000000 or not _futex.AVAILABLE:
            return
        ahead = n + self._low_water
        if ahead < self._batches and _WORD.unpack_from(
                self._slots_mm, self._header_at + (ahead % self._nslots) * HEADER_BYTES)[0] == ahead + 1:
            return  # enough is ready ahead: the server's timed poll will see the release
        _futex.wake(self._released_addr)

    def report(self, seq: int, wait_s: float, step_s: float) -> None:
        """Tells the server how long the loop waited for batch seq and how long its last step took (seconds);
        doorbell streams send the means of up to _REPORT_STEPS steps in one message."""
        if not self.doorbell:
            self._out.put(("report", seq, wait_s, step_s, time.time(), 1))
            return
        self._report_n += 1
        self._report_wait += wait_s
        self._report_step += step_s
        now = time.monotonic()
        if self._report_n >= _REPORT_STEPS or now - self._report_at >= _REPORT_EVERY_S:
            n = self._report_n
            self._out.put(("report", seq, self._report_wait / n, self._report_step / n, time.time(), n))
            self._report_n, self._report_wait, self._report_step, self._report_at = 0, 0.0, 0.0, now

    def close(self) -> None:
        """Ends the stream (the server then frees its ring) and releases the local mapping."""
        if self._closed:
            return
        self._closed = True
        self._out.put(None)
        self._call.cancel()
        if self._ring_reader is not None and self._ring_reader.is_alive() and \
                self._ring_reader is not threading.current_thread():
            self._ring_reader.join(timeout=10)  # before the ring is unmapped under it
        if self._reader is not threading.current_thread():
            self._reader.join(timeout=10)
            self._call = None  # the call's request iterator refers to this object: break the cycle
        with self._copier_lock:
            if self._copier is not None:
                self._copier.close()  # its thread stops before the ring is unmapped
                self._copier = None
        # Drop queued batches before closing the mapping they may still reference (they hold copies, but be sure).
        while True:
            try:
                self._in.get_nowait()
            except queue.Empty:
                break
        if self.converter is not None:
            self.converter.close()
        self._released = None  # (a numpy view of the control page: gone before the mapping closes)
        if self.ring is not None:
            self.ring.close()
