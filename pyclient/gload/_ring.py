"""The client side of the shared-memory transport: a server's ring file mapped read-only, with numpy (and torch)
views of its slots (CUDA batches are made from them on the host and copied to the device from pinned staging memory).

Lifetimes: views of a slot are only valid until the slot is acknowledged (the server then writes the next batch into
it), and the mapping cannot be closed while any view is alive (``mmap.close`` raises ``BufferError``), so the client
copies out of a slot before handing a batch to the user and :meth:`Ring.close` drops its own views first.
"""

from __future__ import annotations

import logging
import mmap
import os
import warnings
from typing import Any, Optional

import numpy as np

from ._peercred import open_ring
from .errors import ProtocolError

log = logging.getLogger("gload")

# The doorbell control region (loader/shm/doorbell.go): word 0 is the released count; bytes 8 and 16 the server's and
# the client's waiting flags (uint32: 1 while that side sleeps in a futex); slot i's header of 8 words starts at byte
# HEADER_START + i × HEADER_BYTES.
SERVER_WAITING = 8
CLIENT_WAITING = 16
HEADER_START = 64
HEADER_BYTES = 64

class Ring:
    """A read-only mapping of a server's ring of ``slots`` slots of ``slot_bytes`` bytes each."""

    def __init__(self, path: str, slots: int, slot_bytes: int, control_offset: int = 0, control_bytes: int = 0,
                 owner: Optional[int] = None) -> None:
        """Maps the ring ``path`` a server announced. ``owner`` is the server's uid (its peer credentials; default:
        ours): the ring must be a ring name in /dev/shm or the server's own private directory, a regular file with one
        link belonging to ``owner``, of the announced size (``_peercred.open_ring``); a symbolic link is not followed.
        """
        if slots < 1 or slot_bytes < 1:
            raise ProtocolError(f"opened: ring {path} of {slots} slots of {slot_bytes} bytes")
        if control_bytes and (control_offset != slots * slot_bytes or control_bytes < HEADER_START + HEADER_BYTES * slots
                              or control_bytes % mmap.PAGESIZE):
            raise ProtocolError(f"opened: ring {path}: control region of {control_bytes} bytes at {control_offset} "
                                f"does not follow {slots} slots of {slot_bytes} bytes")
        self.path = path
        self.slots = slots
        self.slot_bytes = slot_bytes
        size = slots * slot_bytes + control_bytes
        # The slots are only read; the control region's first page (the released word) is written too.
        want = f"{slots}×{slot_bytes}" + (f" + {control_bytes}" if control_bytes else "") + " bytes"
        fd = open_ring(path, os.O_RDWR if control_bytes else os.O_RDONLY, os.geteuid() if owner is None else owner,
                       size, want)
        try:
            self._mm: Optional[mmap.mmap] = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
            self._ctl_mm: Optional[mmap.mmap] = None
            if control_bytes:
                self._ctl_mm = mmap.mmap(fd, mmap.PAGESIZE, flags=mmap.MAP_SHARED,
                                         prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=control_offset)
        finally:
            os.close(fd)
        self._bytes: Optional[np.ndarray] = np.frombuffer(self._mm, dtype=np.uint8)
        # Doorbell (Opened.control_offset): the slots' headers (read), the released word (written) and the waiting
        # flags (the server's read, the client's written).
        self.headers: Optional[np.ndarray] = None
        self.released: Optional[np.ndarray] = None
        self.server_waiting: Optional[np.ndarray] = None
        self.client_waiting: Optional[np.ndarray] = None
        if control_bytes:
            self.headers = np.frombuffer(self._mm, dtype="<u8", count=slots * HEADER_BYTES // 8,
                                         offset=control_offset + HEADER_START).reshape(slots, HEADER_BYTES // 8)
            self.released = np.frombuffer(self._ctl_mm, dtype="<u8", count=1)
            self.server_waiting = np.frombuffer(self._ctl_mm, dtype="<u4", count=1, offset=SERVER_WAITING)
            self.client_waiting = np.frombuffer(self._ctl_mm, dtype="<u4", count=1, offset=CLIENT_WAITING)
        self._torch: Any = None  # torch.uint8 tensor over the whole ring, made on demand

    @property
    def address(self) -> int:
        """The mapping's start address."""
        assert self._bytes is not None
        return int(self._bytes.ctypes.data)

    def slots_mapping(self) -> mmap.mmap:
        """The whole mapping (slots, then the control region), for struct reads of the slots' headers."""
        if self._mm is None:
            raise ProtocolError(f"ring {self.path} is closed")
        return self._mm

    def control_mapping(self) -> mmap.mmap:
        """The writable first page of the control region (the released word at 0, the waiting flags at
        SERVER_WAITING and CLIENT_WAITING)."""
        if self._ctl_mm is None:
            raise ProtocolError(f"ring {self.path} has no control region")
        return self._ctl_mm

    def view(self, slot: int, offset: int, dtype: Any, count: int) -> np.ndarray:
        """A numpy view of ``count`` elements of ``dtype`` at byte ``offset`` of ``slot``: valid until the slot is
        acknowledged and never after :meth:`close`."""
        dt = np.dtype(dtype).newbyteorder("<")
        start, end = self._span(slot, offset, count * dt.itemsize)
        assert self._bytes is not None
        return self._bytes[start:end].view(dt)

    def torch_view(self, slot: int, offset: int, dtype: Any, count: int) -> Any:
        """Like :meth:`view`, as a torch tensor (of ``torch`` dtype ``dtype``) over the mapping: no copy."""
        import torch

        if self._torch is None:
            with warnings.catch_warnings():
                # The mapping is read-only; torch warns about that once. The client never writes through it.
                warnings.simplefilter("ignore")
                self._torch = torch.from_numpy(self._bytes)
        itemsize = torch.empty((), dtype=dtype).element_size()
        start, end = self._span(slot, offset, count * itemsize)
        return self._torch[start:end].view(dtype)

    def _span(self, slot: int, offset: int, nbytes: int) -> "tuple[int, int]":
        if not 0 <= slot < self.slots or offset < 0 or nbytes < 0 or offset + nbytes > self.slot_bytes:
            raise ProtocolError(
                f"ring {self.path}: {nbytes} bytes at offset {offset} of slot {slot} do not fit "
                f"{self.slots} slots of {self.slot_bytes} bytes"
            )
        if self._bytes is None:
            raise ProtocolError(f"ring {self.path} is closed")
        start = slot * self.slot_bytes + offset
        return start, start + nbytes

    def close(self) -> None:
        """Unmaps the ring. Views handed out earlier must be gone; if some are still
        alive the mapping is left to the garbage collector (the server removes the file in any case)."""
        if self._mm is None:
            return
        self._torch = None
        self._bytes = None
        self.headers = None
        self.released = None
        self.server_waiting = None
        self.client_waiting = None
        if self._ctl_mm is not None:
            ctl, self._ctl_mm = self._ctl_mm, None
            try:
                ctl.close()
            except BufferError:
                pass
        mm, self._mm = self._mm, None
        try:
            mm.close()
        except BufferError:
            log.debug("gload: ring %s still has views; unmapped when they are gone", self.path)
