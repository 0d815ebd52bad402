"""The Python side of the native batch copier (gload/_copier.c, built with the package): a thread without Python in
it takes doorbell batches out of the ring, makes the user's keys into an output buffer given to it ahead of time
(numpy memory, or a device buffer reached by one DMA from pinned staging on a side stream, recorded with an event),
returns the slot to the server and marks the batch ready. ``next()`` then takes the ready batch: one call into the
library (CUDA: the loop's stream is told to wait for the copy's event; no host sync), views of the buffer, and the
next buffer for the copier.

Holds: the library's loading (:data:`AVAILABLE`, :data:`WHY_NOT`), which streams it can serve (:func:`supports`),
and :class:`Copier`. Must not touch the ring's slots (the copier only reads them) or any Python object from the
copier's thread: it knows addresses only, and every buffer it writes is kept alive here until it is handed out.

``GLOAD_NATIVE=0`` turns it off (the Python paths then serve every stream, as before it existed).
"""

from __future__ import annotations

import collections
import ctypes
import glob
import os
import sys
import threading
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .errors import ProtocolError

# Keys and slot fields in the library's codes.
KEYS = ("input_ids", "attention_mask", "labels", "position_ids", "cu_seqlens", "index", "lengths", "source")
_KEY_CODE = {k: i for i, k in enumerate(KEYS)}
_FIELDS = ("input_ids", "lengths", "index", "position_ids", "cu_seqlens", "labels")
_TWO_D = {"input_ids", "attention_mask", "labels", "position_ids"}
_FIXED_DTYPE = {"cu_seqlens": np.dtype(np.int32), "index": np.dtype(np.int64), "lengths": np.dtype(np.int32),
                "source": np.dtype(np.int64)}

# Entry states and info words (the enums of _copier.c).
S_EMPTY, S_FREE, S_FILLING, S_READY, S_FAILED, S_NEED = range(6)
I_SEQ, I_GLOBAL, I_RANK_STEP, I_ROWS, I_LENGTH, I_PIECES, I_CU_LEN, I_TRAINED, I_REAL, I_BYTES = range(10)
I_OFF = 10
I_ERROR = I_OFF + len(KEYS)
I_NEED = I_ERROR + 1
I_DETAIL = I_ERROR + 2
I_COUNTS = I_ERROR + 3
I_WORDS = I_ERROR + 4
_ABSENT = 2**64 - 1
_ERRORS = {1: "the slot changed while its batch was read", 2: "a buffer does not fit its slot",
           3: "an empty shape", 4: "a CUDA call failed", 5: "an index entry below the mixture's first source"}

SPIN_US = 20  # how long either side spins (yielding) before it sleeps in a futex


class Config(ctypes.Structure):
    _fields_ = [
        ("ring", ctypes.c_uint64), ("slot_bytes", ctypes.c_uint64), ("headers", ctypes.c_uint64),
        ("released", ctypes.c_uint64), ("server_waiting", ctypes.c_uint64), ("client_waiting", ctypes.c_uint64),
        ("batches", ctypes.c_uint64), ("field_off", ctypes.c_uint64 * len(_FIELDS)),
        ("slots", ctypes.c_uint32), ("low_water", ctypes.c_uint32), ("entries", ctypes.c_uint32),
        ("key_bytes", ctypes.c_int32 * len(KEYS)), ("key_order", ctypes.c_int32 * len(KEYS)),
        ("stored_labels", ctypes.c_int32), ("shift_labels", ctypes.c_int32), ("ignore_index", ctypes.c_int64),
        ("position_start", ctypes.c_int32), ("cuda", ctypes.c_int32), ("device", ctypes.c_int32),
        ("side_stream", ctypes.c_uint64), ("spin_us", ctypes.c_int32),
        ("sources", ctypes.c_uint32), ("source_offsets", ctypes.c_uint64), ("counts_out", ctypes.c_uint64),
    ]


def _load() -> "Tuple[Any, Any, str]":
    if os.environ.get("GLOAD_NATIVE", "1") == "0":
        return None, None, "GLOAD_NATIVE=0"
    if not sys.platform.startswith("linux"):
        return None, None, f"the native copier is built for Linux only (this is {sys.platform})"
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "_copier*.so")))
    if not found:
        return None, None, f"no _copier*.so in {here} (the package was installed without a C compiler)"
    try:
        free_lib = ctypes.CDLL(found[0])  # calls that may block: the GIL is released around them
        held_lib = ctypes.PyDLL(found[0])  # calls of a few hundred nanoseconds: the GIL stays held
    except OSError as e:
        return None, None, f"{found[0]}: {e}"
    if free_lib.gl_config_size() != ctypes.sizeof(Config) or free_lib.gl_info_words() != I_WORDS:
        return None, None, f"{found[0]} is from another version of gload (rebuild the package)"
    u64, u32, vp = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p
    free_lib.gl_new.restype = vp
    free_lib.gl_new.argtypes = [ctypes.POINTER(Config), ctypes.c_char_p, ctypes.c_size_t]
    free_lib.gl_start.argtypes = [vp]
    free_lib.gl_wait.argtypes = [vp, u64, ctypes.c_long]
    held_lib.gl_state.argtypes = [vp, u64]
    free_lib.gl_free.argtypes = [vp]
    free_lib.gl_error.restype = ctypes.c_char_p
    free_lib.gl_error.argtypes = [vp]
    free_lib.gl_convert.argtypes = [ctypes.POINTER(Config), vp, vp, vp, u64, vp]
    held_lib.gl_give.argtypes = [vp, u32, u64, u64, u64]
    held_lib.gl_take.argtypes = [vp, u64, u64, vp, u64, u64]
    return free_lib, held_lib, ""


_free, _held, WHY_NOT = _load()
AVAILABLE = _free is not None


def supports(conv: Any) -> str:
    """Why the copier cannot serve the converter's stream ('' when it can): its keys and dtypes are the copier's
    (int32 or int64), no zero_copy views."""
    if not AVAILABLE:
        return WHY_NOT or "turned off"
    if conv.zero_copy_wanted:
        return "zero_copy views are the ring's own memory"
    for k in conv.keys:
        if k not in _KEY_CODE:
            return f"key {k!r}"
        if k in _TWO_D and np.dtype(conv._dtypes.get(k, np.int64)).itemsize not in (4, 8):
            return f"dtype of {k}"
    if conv.tensors == "pt" and not conv.cuda and conv.device is not None and conv.device.type != "cpu":
        return f"device {conv.device}"
    return ""


def config_for(conv: Any, ring: Any, layout: Any, opened: Any, entries: int) -> Config:
    """The library's config for a converter's stream over ring (layout: the slot layout; opened: the Opened)."""
    c = Config()
    if ring is not None:
        from ._ring import CLIENT_WAITING, HEADER_START, SERVER_WAITING

        ctl = int(ring.released.ctypes.data)
        c.ring = ring.address
        c.headers = ring.address + opened.control_offset + HEADER_START
        c.released = ctl
        c.server_waiting = ctl + SERVER_WAITING
        c.client_waiting = ctl + CLIENT_WAITING
        c.slots = ring.slots
        c.slot_bytes = ring.slot_bytes
        c.low_water = max(1, ring.slots // 2)
    if opened is not None:
        c.batches = opened.batches
    if layout is not None:
        for i, f in enumerate(_FIELDS):
            c.field_off[i] = getattr(layout, f)
    c.entries = entries
    for i in range(len(KEYS)):
        c.key_order[i] = -1
    for i, k in enumerate(conv.keys):
        c.key_order[i] = _KEY_CODE[k]
        c.key_bytes[_KEY_CODE[k]] = _key_dtype(conv, k).itemsize
    offs = conv.source_offsets
    if offs is not None:  # (an int64 array the converter keeps)
        assert offs.dtype == np.int64 and offs.flags.c_contiguous
        c.sources = len(offs)
        c.source_offsets = offs.ctypes.data
    c.stored_labels = int(conv.stored_labels)
    c.shift_labels = int(conv.shift_labels)
    c.ignore_index = conv.ignore_index
    c.position_start = conv.position_start
    c.spin_us = SPIN_US
    return c


def _key_dtype(conv: Any, k: str) -> np.dtype:
    return _FIXED_DTYPE[k] if k in _FIXED_DTYPE else np.dtype(conv._dtypes.get(k, np.int64))


def convert_one(cfg: Config, slot: np.ndarray, words: "Tuple[int, ...]") -> Tuple[np.ndarray, np.ndarray]:
    """One batch through the library's conversion (for tests): (output bytes, info words); raises on its errors."""
    w = np.asarray(words, dtype=np.uint64)
    info = np.zeros(I_WORDS, dtype=np.uint64)
    cap = 1 << 16
    while True:
        out = np.zeros(cap, dtype=np.uint8)
        rc = _free.gl_convert(ctypes.byref(cfg), slot.ctypes.data, w.ctypes.data, out.ctypes.data, cap,
                              info.ctypes.data)
        if rc != -1:
            break
        cap = int(info[I_NEED])
    if rc != 0:
        raise ProtocolError(f"native conversion: {_ERRORS.get(rc, rc)} (field {int(info[I_DETAIL])})")
    return out, info


class Copier:
    """One doorbell stream's copier thread and the output buffers it fills (``entries`` batches ahead at most).

    ``take(seq)`` returns ``(data, info)`` for batch seq when the copier has made it (None otherwise; raises on the
    copier's errors); ``wait(seq, timeout_s)`` sleeps until it is ready (or failed), at most timeout_s. Both on the
    iterating thread; ``close`` (from any thread) stops the copier's thread and frees the library's memory."""

    def __init__(self, conv: Any, ring: Any, layout: Any, opened: Any) -> None:
        self.conv = conv
        self.ring = ring  # kept: the copier reads the mapping until close()
        self.pid = os.getpid()
        self.entries = max(1, min(ring.slots, 16))
        self.cfg = config_for(conv, ring, layout, opened, self.entries)
        self.cuda = bool(conv.cuda)
        self._keys = [(k, _KEY_CODE[k], _key_dtype(conv, k)) for k in conv.keys]
        # Mixtures: the rows and tokens per source of the batch taken last (copied here by the library).
        self.sources = int(self.cfg.sources)
        self._counts = np.zeros(2 * max(1, self.sources), dtype=np.int64)
        self.cfg.counts_out = self._counts.ctypes.data
        self._info = np.zeros(I_WORDS, dtype=np.uint64)
        self._info_addr = int(self._info.ctypes.data)
        # Each entry's output buffer as _alloc made it, (buffer, address, stream allocated on); the spare is the next
        # one, made before a take that then found no batch ready.
        self._bufs: list = [None] * self.entries
        self._spare: Any = None
        # numpy buffers handed out, oldest first, to be given to the copier again once their batch is gone
        self._pool: Any = collections.deque(maxlen=2 * self.entries + 2)
        self.reused = 0  # buffers given again from the pool (for tests)
        self._cap = self._initial_cap(opened)
        self._handle: Optional[int] = None
        # take/wait against close from another thread (Loader.close while next() waits): the library's memory is
        # freed only when neither runs. Uncontended, a fraction of a microsecond.
        self._lock = threading.Lock()
        if self.cuda:
            import torch

            self._torch = torch
            self._device = conv.device
            self.cfg.cuda = 1
            self.cfg.device = self._device.index
            self.cfg.side_stream = conv._stream.cuda_stream  # the converter's side stream (it serves no copy now)
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            idx = self._device.index
            self._cur = (lambda: raw(idx)) if raw is not None else \
                (lambda: torch.cuda.current_stream(self._device).cuda_stream)
        elif conv.tensors == "pt":
            import torch

            self._torch = torch
        err = ctypes.create_string_buffer(256)
        h = _free.gl_new(ctypes.byref(self.cfg), err, 256)
        if not h:
            raise ProtocolError(f"native copier: {err.value.decode(errors='replace')}")
        self._handle = h
        try:
            for i in range(self.entries):
                self._give(i, self._cap)
            if _free.gl_start(h) != 0:
                raise ProtocolError("native copier: its thread did not start")
        except BaseException:
            self.close()
            raise

    def _initial_cap(self, opened: Any) -> int:
        rows = max((s.rows for s in opened.shapes), default=1)
        cells = max((s.rows * s.length for s in opened.shapes), default=1)
        n = 0
        for k, _, dt in self._keys:
            count = cells if k in _TWO_D else (rows + 1 if k == "cu_seqlens" else rows)
            n += (count * dt.itemsize + 63) // 64 * 64
        n += 16 * self.sources
        return max(4096, (n + 4095) // 4096 * 4096)

    def _alloc(self, cap: int) -> Any:
        """An output buffer of cap bytes: (buffer, its address, the stream it was allocated on). CUDA: allocated on
        the loop's current stream (the copy into it waits for that stream's position now), as int64 and int32
        views of one block."""
        if self.cuda:
            t = self._torch.empty(cap // 8, dtype=self._torch.int64, device=self._device)
            return (t, t.view(self._torch.int32)), t.data_ptr(), self._cur()
        # numpy: the oldest buffer handed out comes back once nothing refers to it any more (every array of its batch
        # is gone: they all hold it as their base). Fresh memory costs the copier's thread a page fault per 4 KiB,
        # concurrently with the loop — measured as a CPU-bound loop's slowdown.
        pool = self._pool
        if pool and pool[0][0].nbytes == cap and sys.getrefcount(pool[0][0]) == 2:
            self.reused += 1
            return pool.popleft() + (0,)
        a = np.empty(cap, dtype=np.uint8)
        return a, a.ctypes.data, 0

    def _give(self, i: int, cap: int) -> None:
        """A new output buffer for entry i (the old one, if any, now belongs to the batch handed out)."""
        new = self._bufs[i] = self._alloc(cap)
        rc = _held.gl_give(self._handle, i, new[1], cap, new[2])
        if rc != 0:
            raise ProtocolError(f"native copier: cuEventRecord failed with CUDA error {rc}")

    def take(self, seq: int) -> "Optional[Tuple[Dict[str, Any], list]]":
        """Batch seq if the copier has made it: its dict (views of its own buffer) and the info words; else None.
        The entry gets the next buffer in the same call (allocated here before: a spare is kept when the batch was
        not ready)."""
        with self._lock:
            if self._handle is None:
                raise ProtocolError(f"batch {seq}: the stream was closed (Loader.close()) while next() waited for it")
            return self._take(seq)

    def _take(self, seq: int) -> "Optional[Tuple[Dict[str, Any], list]]":
        spare = self._spare
        if spare is None:
            spare = self._spare = self._alloc(self._cap)
        _, addr, stream = spare
        s = _held.gl_take(self._handle, seq, stream, self._info_addr, addr, self._cap)
        if s != S_READY:
            if s == S_FAILED:
                self._raise(seq)
            if s == S_NEED:
                self._cap = max(self._cap, (int(self._info[I_NEED]) + 4095) // 4096 * 4096)
                self._spare = None
                self._give(seq % self.entries, self._cap)
            return None
        self._spare = None
        info = self._info.tolist()
        i = seq % self.entries
        buf, old_addr, alloc_stream = self._bufs[i]
        self._bufs[i] = spare
        if not self.cuda:
            self._pool.append((buf, old_addr))
        rows, length = info[I_ROWS], info[I_LENGTH]
        out: Dict[str, Any] = {}
        if self.cuda:
            b64, b32 = buf
            as_strided = self._torch.as_strided
            for k, code, dt in self._keys:
                off = info[I_OFF + code]
                if off == _ABSENT:
                    continue
                if k in _TWO_D:
                    shape, stride = (rows, length), (length, 1)
                else:
                    shape, stride = (self._count(k, info),), (1,)
                if dt.itemsize == 8:
                    out[k] = as_strided(b64, shape, stride, off // 8)
                else:
                    out[k] = as_strided(b32, shape, stride, off // 4)
            if stream != alloc_stream:  # handed out on another stream than its block was allocated on
                b64.record_stream(self._torch.cuda.current_stream(self._device))
        else:
            for k, code, dt in self._keys:
                off = info[I_OFF + code]
                if off == _ABSENT:
                    continue
                shape = (rows, length) if k in _TWO_D else (self._count(k, info),)
                out[k] = np.ndarray(shape, dt, buf, off)
            if self.conv.tensors == "pt":
                from_numpy = self._torch.from_numpy
                out = {k: from_numpy(v) for k, v in out.items()}
        return out, info

    def source_counts(self, info: list) -> "Tuple[np.ndarray, Optional[np.ndarray]]":
        """Mixtures: the (rows, tokens) per source of the batch take() returned last (tokens None when packed), as
        Converter.pop_source_counts gives them."""
        n = self.sources
        rows = self._counts[:n].copy()
        return rows, (None if info[I_CU_LEN] > 0 else self._counts[n:2 * n].copy())

    @staticmethod
    def _count(k: str, info: list) -> int:
        if k == "cu_seqlens":
            return info[I_CU_LEN]
        if k in ("index", "source"):
            return info[I_PIECES]
        return info[I_ROWS]

    def _raise(self, seq: int) -> None:
        code = int(self._info[I_ERROR])
        detail = int(self._info[I_DETAIL])
        what = _ERRORS.get(code, f"error {code}")
        if code == 2:
            what += f" ({_FIELDS[detail] if detail < len(_FIELDS) else detail})"
        elif code == 1:
            what += f" (slot {detail})"
        elif code == 4:
            what = _free.gl_error(self._handle).decode(errors="replace")
        raise ProtocolError(f"ring {self.ring.path}: batch {seq}: {what}")

    def wait(self, seq: int, timeout_s: float) -> None:
        """Sleeps (the GIL released) until batch seq is ready, failed or needs a larger buffer; at most timeout_s."""
        with self._lock:
            if self._handle is not None:
                _free.gl_wait(self._handle, seq, int(max(0.0, timeout_s) * 1e6))

    def close(self) -> None:
        """Stops the thread (joined before the ring can be unmapped) and drops the buffers."""
        if os.getpid() != self.pid:
            self._handle = None  # a forked child: the thread is not here; the memory is the parent's copy
            return
        with self._lock:
            h, self._handle = self._handle, None
            if h is None:
                return
            _free.gl_free(h)
        self._bufs = [None] * self.entries
        self._pool.clear()
        self._spare = None
        self.ring = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
