"""Turning one wire batch into the dict a training loop gets: numpy arrays, torch CPU tensors, or torch tensors on a
CUDA device copied with non-blocking DMA on a side stream.

Every array or tensor handed out is owned by the caller and writable: the data is copied once, out of the gRPC
message or the shared-memory slot, so the slot can be returned to the server as soon as the copy is done.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Dict, Optional, Sequence

import numpy as np

from . import _keys
from ._proto import gload_pb2 as pb
from ._ring import Ring
from .errors import ProtocolError

log = logging.getLogger("gload")

IGNORE_INDEX = _keys.DEFAULT_IGNORE_INDEX  # labels of padding (and of packed documents' first tokens)

# zero_copy view plans kept per stream (slots × shapes; bucketed batches have tens of shapes).
_MAX_VIEW_PLANS = 4096

# The buffers of a batch: (wire field, element dtype).
_FIELDS = (("input_ids", "<i4"), ("lengths", "<i4"), ("index", "<i8"), ("position_ids", "<i4"), ("cu_seqlens", "<i4"),
           ("labels", "<i4"))


def _counts(b: "pb.Batch", stored_labels: bool = False) -> Dict[str, int]:
    """Element counts of each buffer of b, from its shape; stored_labels: the stream serves an SFT dataset's labels
    (Opened.labels)."""
    cells = b.rows * b.length
    packed = b.cu_len > 0
    return {
        "input_ids": cells,
        "lengths": b.rows,
        "index": b.pieces,
        "position_ids": cells if packed else 0,
        "cu_seqlens": b.cu_len,
        "labels": cells if stored_labels else 0,
    }


def _check_bytes(b: "pb.Batch", counts: Dict[str, int]) -> None:
    for name, dt in _FIELDS:
        got = len(getattr(b, name))
        want = counts[name] * np.dtype(dt).itemsize
        if got != want:
            raise ProtocolError(f"batch {b.seq}: {name} has {got} bytes, want {want} for {b.rows}×{b.length}")


class Converter:
    """Converts wire batches of one stream. ``convert`` runs on the stream's reader thread; ``hand_out`` on the
    thread that iterates."""

    def __init__(
        self,
        *,
        tensors: str,
        device: Any,
        dtypes: Dict[str, np.dtype],
        labels: bool,
        position_start: int,
        keys: Sequence[str],
        ring: Optional[Ring],
        layout: Optional["pb.SlotLayout"],
        shift_labels: bool = False,
        ignore_index: int = IGNORE_INDEX,
        static_buffers: bool = False,
        zero_copy: bool = False,
    ) -> None:
        self.tensors = tensors
        # Doorbell numpy streams with zero_copy: keys the slot holds in the wanted dtype are handed out as read-only
        # views of it (valid until the slot is released, at the next next() call); set on Opened, since only a
        # doorbell stream converts on the caller's thread and releases a slot when told.
        self.zero_copy_wanted = bool(zero_copy)
        self.zero_copy = False
        # CUDA: every batch of one shape handed out in the same device tensors (for CUDA graphs), copied into them
        # on the caller's stream in hand_out.
        self.static_buffers = bool(static_buffers)
        self._static: Dict[Any, Dict[str, Any]] = {}
        self.labels = labels or "labels" in keys
        self.stored_labels = False  # set from Opened.labels: batches carry the dataset's SFT labels
        # Mixtures (set from Opened.source_offsets): index entry v is row v - offsets[s] of source s.
        self.source_offsets: Optional[np.ndarray] = None
        self._source_counts: Dict[int, Any] = {}  # id(batch dict) -> (rows, tokens) per source, until handed out
        self._label_counts: Dict[int, Any] = {}  # SFT: id(batch dict) -> (trained tokens, real tokens)
        self.shift_labels = shift_labels
        self.ignore_index = int(ignore_index)
        self.position_start = position_start
        self.keys = tuple(keys)
        self.ring = ring
        self.layout = layout
        self.device = device
        self.cuda = False
        self._dtypes = dict(dtypes)
        self._np_aranges: Dict[int, np.ndarray] = {}
        self._slot_views: Dict[int, Dict[str, np.ndarray]] = {}  # typed views of each ring slot, made once
        # zero_copy batches made of views only (no key computed per batch): the views per (slot, shape), made
        # once; a batch gets fresh view objects of them (see _planned).
        self._view_plans: Dict[Any, Dict[str, np.ndarray]] = {}
        if tensors == "pt":
            import torch

            self._torch_dtypes = _keys.torch_dtypes(self._dtypes)
            if device is not None and torch.device(device).type == "cuda":
                self.cuda = True
                self.device = torch.device(device)
                if self.device.index is None:
                    self.device = torch.device("cuda", torch.cuda.current_device())
                self._stream = torch.cuda.Stream(device=self.device)
                self._thread: Optional[int] = None
                self._slots: Dict[int, Any] = {}  # torch views of ring slots
                self._pending_events: Dict[int, Any] = {}  # id(batch dict) -> its event, until handed out
                self._aranges: Dict[int, Any] = {}
                self._staging: Any = None  # pinned host buffer for gRPC batches
                if ring is not None:
                    ring.register_cuda()
            elif device is not None:
                self.device = torch.device(device)

    # -- sources ---------------------------------------------------------------------------------------------------

    def _np_sources(self, b: "pb.Batch") -> Dict[str, np.ndarray]:
        """numpy views of b's buffers (in the message or the slot): valid until the batch is acknowledged."""
        counts = _counts(b, self.stored_labels)
        out = {}
        if b.slot >= 0:
            if self.ring is None or self.layout is None:
                raise ProtocolError(f"batch {b.seq} names slot {b.slot} on a stream without a ring")
            views = self._slot_views.get(b.slot)
            if views is None:
                views = self._slot_views[b.slot] = self._make_slot_views(b.slot)
            for name, _ in _FIELDS:
                n = counts[name]
                v = views[name]
                if n > len(v):
                    raise ProtocolError(f"ring {self.ring.path}: batch {b.seq}: {n} {name} do not fit slot {b.slot} "
                                        f"from offset {getattr(self.layout, name)}")
                out[name] = v[:n]
        else:
            _check_bytes(b, counts)
            for name, dt in _FIELDS:
                out[name] = np.frombuffer(getattr(b, name), dtype=dt)
        return out

    def _make_slot_views(self, slot: int) -> Dict[str, np.ndarray]:
        """Typed numpy views of one slot from each buffer's offset to the slot's end (made once per slot; a batch
        takes the first count elements of each)."""
        assert self.ring is not None and self.layout is not None
        out = {}
        for name, dt in _FIELDS:
            off = getattr(self.layout, name)
            size = np.dtype(dt).itemsize
            room = (self.ring.slot_bytes - off) // size if off < self.ring.slot_bytes else 0
            out[name] = self.ring.view(slot, min(off, self.ring.slot_bytes), dt, room)
        return out

    # -- conversion ------------------------------------------------------------------------------------------------

    def convert(self, b: "pb.Batch") -> Dict[str, Any]:
        """Copies batch b out of its message or slot and builds the user's dict. When this returns, the batch's
        slot may be reused by the server."""
        if b.rows == 0 or b.length == 0:
            raise ProtocolError(f"batch {b.seq}: empty shape {b.rows}×{b.length}")
        if self.cuda:
            return self._convert_cuda(b)
        if self.zero_copy:
            planned = self.planned(b.shape_key)
            if planned is not None:
                return planned
        src = self._np_sources(b)
        rows, length = b.rows, b.length
        dt = self._dtypes
        want = self.keys
        ids32 = src["input_ids"].reshape(rows, length)
        # zero_copy: keys in the slot's dtype are the slot's own (read-only) memory; otherwise each key is a copy.
        take = (lambda a, d: a if a.dtype == d else a.astype(d)) if self.zero_copy else (lambda a, d: a.astype(d))
        ids = take(ids32, dt["input_ids"])
        lengths = take(src["lengths"], np.dtype(np.int32))
        out: Dict[str, Any] = {"input_ids": ids}
        mask = None
        # Rows that all fill the batch's length (packed batches, fixed-length data) need no comparison: the mask is
        # all ones (half the cost of comparing and converting).
        full = False
        if "attention_mask" in want or (self.labels and not self.stored_labels):
            full = int(lengths.min()) >= length
            if not full:
                ar = self._np_aranges.get(length)
                if ar is None:
                    ar = self._np_aranges[length] = np.arange(length, dtype=np.int32)[None, :]
                mask = ar < lengths[:, None]
        if "attention_mask" in want:
            out["attention_mask"] = (np.ones((rows, length), dt["attention_mask"]) if full
                                     else mask.astype(dt["attention_mask"]))
        packed = b.cu_len > 0
        pos = None
        if packed:
            pos = src["position_ids"].reshape(rows, length)
        if self.labels and self.stored_labels:
            labels = src["labels"].reshape(rows, length)  # -100 already where no loss
            if self.ignore_index != IGNORE_INDEX or self.shift_labels:
                labels = labels.astype(dt["labels"])  # changed below: a copy whatever zero_copy says
            else:
                labels = take(labels, dt["labels"])
            if self.ignore_index != IGNORE_INDEX:
                labels[labels == IGNORE_INDEX] = self.ignore_index
            if self.shift_labels:
                labels = _keys.shift_labels_np(labels, self.ignore_index)
            out["labels"] = labels
        elif self.labels:
            labels = (ids32.astype(dt["labels"]) if full
                      else np.where(mask, ids32, self.ignore_index).astype(dt["labels"]))
            if pos is not None:
                labels[pos == self.position_start] = self.ignore_index
            if self.shift_labels:
                labels = _keys.shift_labels_np(labels, self.ignore_index)
            out["labels"] = labels
        if pos is not None:
            if "position_ids" in want:
                out["position_ids"] = take(pos, dt["position_ids"])
            if "cu_seqlens" in want:
                out["cu_seqlens"] = take(src["cu_seqlens"], np.dtype(np.int32))
        out["index"] = take(src["index"], np.dtype(np.int64))
        out["lengths"] = lengths
        counts = self._split_sources(out, lengths, packed)
        out = self._select(out)
        if self.tensors == "pt":
            import torch

            out = {k: torch.from_numpy(v) for k, v in out.items()}
            if self.device is not None and self.device.type != "cpu":
                out = {k: v.to(self.device) for k, v in out.items()}
        if counts is not None:
            self._source_counts[id(out)] = counts
        if self.stored_labels:
            self._label_counts[id(out)] = (int(b.trained_tokens), int(lengths.sum()))
        elif self.zero_copy and counts is None:
            self._plan(b.shape_key, out)
        return out

    def planned(self, key: Any) -> Optional[Dict[str, Any]]:
        """zero_copy: the batch at key (slot, rows | length << 32, pieces | cu_len << 32) from its slot's kept
        views, as fresh view objects (a caller may reshape its own); None when there is no plan for it."""
        plan = self._view_plans.get(key)
        if plan is None:
            return None
        return {k: v.view() for k, v in plan.items()}

    def _plan(self, key: Any, out: Dict[str, Any]) -> None:
        """zero_copy: keeps a batch's views for the next batch of the same slot and shape when every key is a
        (read-only) view of the slot — nothing is computed from the batch's content, so the same views serve every
        batch there. Bounded: forgotten all at once past _MAX_VIEW_PLANS."""
        if not all(isinstance(v, np.ndarray) and not v.flags.writeable for v in out.values()):
            return
        if len(self._view_plans) >= _MAX_VIEW_PLANS:
            self._view_plans.clear()
        self._view_plans[key] = {k: v.view() for k, v in out.items()}

    def _split_sources(self, out: Dict[str, Any], lengths: np.ndarray, packed: bool) -> Any:
        """Mixtures: turns out["index"] (numpy, the mixture's row space) into the row within its source and adds
        out["source"]; returns the batch's (rows, tokens) per source (tokens: None for packed batches)."""
        offs = self.source_offsets
        if offs is None:
            return None
        idx = out["index"]
        src = np.searchsorted(offs, idx, side="right") - 1
        out["index"] = idx - offs[src]
        out["source"] = src.astype(np.int64)
        rows = np.bincount(src, minlength=len(offs))
        tokens = None if packed else np.bincount(src, weights=lengths, minlength=len(offs)).astype(np.int64)
        return rows, tokens

    def pop_label_counts(self, batch: Dict[str, Any]) -> Any:
        """SFT streams: (trained tokens, real tokens) of a batch being handed out (None without stored labels)."""
        return self._label_counts.pop(id(batch), None)

    def pop_source_counts(self, batch: Dict[str, Any]) -> Any:
        """The (rows, tokens) per source of a batch being handed out (None outside mixtures)."""
        return self._source_counts.pop(id(batch), None)

    def _convert_cuda(self, b: "pb.Batch") -> Dict[str, Any]:
        import torch

        if self._thread != threading.get_ident():
            # The reader thread's current device and stream, set once: no context managers per batch.
            torch.cuda.set_device(self.device)
            torch.cuda.set_stream(self._stream)
            self._thread = threading.get_ident()
        counts = _counts(b, self.stored_labels)
        if b.slot >= 0:
            if self.ring is None or self.layout is None:
                raise ProtocolError(f"batch {b.seq} names slot {b.slot} on a stream without a ring")
            offs = {name: getattr(self.layout, name) for name, _ in _FIELDS}
            for name, dt in _FIELDS:  # bounds checks
                self.ring._span(b.slot, offs[name], counts[name] * np.dtype(dt).itemsize)
            src = self._slot_tensor(b.slot)
        else:
            src, offs = self._stage(b, counts)
        try:
            return self._copy_cuda(b, src, offs, counts)
        except RuntimeError as e:
            if self.ring is None or not self.ring.pinned:
                raise
            # A ring the driver registered but cannot DMA from: go on without page-locking it.
            log.warning("gload: copy from registered ring %s failed (%s); unregistering it", self.ring.path, e)
            self.ring.unregister_cuda()
            self._slots.clear()
            return self._copy_cuda(b, self._slot_tensor(b.slot), offs, counts)

    def _slot_tensor(self, slot: int) -> Any:
        """A uint8 torch tensor over one ring slot (made once per slot)."""
        t = self._slots.get(slot)
        if t is None:
            import torch

            assert self.ring is not None
            t = self.ring.torch_view(slot, 0, torch.uint8, self.ring.slot_bytes)
            self._slots[slot] = t
        return t

    def _copy_cuda(self, b: "pb.Batch", src: Any, offs: Dict[str, int], counts: Dict[str, int]) -> Dict[str, Any]:
        """One host-to-device copy of the used part of the slot (or staging buffer), then views and the derived
        tensors computed on the device, all on the side stream. Returns when the copy is done (the slot may be
        reused); the derived tensors are ready once the batch's event has fired (hand_out orders the caller's
        stream after it)."""
        import torch

        rows, length = b.rows, b.length
        end = 0
        for name, dt in _FIELDS:
            if counts[name]:
                end = max(end, offs[name] + counts[name] * (8 if dt == "<i8" else 4))
        gpu = src[:end].to(self.device, non_blocking=True)
        copied = torch.cuda.Event()
        copied.record()

        def field(name: str, dtype: Any) -> Any:
            n = counts[name] * (8 if dtype == torch.int64 else 4)
            return gpu[offs[name]:offs[name] + n].view(dtype)

        tdt = self._torch_dtypes
        want = self.keys
        ids32 = field("input_ids", torch.int32).view(rows, length)
        lengths = field("lengths", torch.int32)
        ids = ids32 if tdt["input_ids"] == torch.int32 else ids32.to(tdt["input_ids"])
        mask = self._arange(length) < lengths[:, None]
        out: Dict[str, Any] = {"input_ids": ids}
        if "attention_mask" in want:
            out["attention_mask"] = mask.to(tdt["attention_mask"])
        pos = None
        if b.cu_len > 0:
            pos = field("position_ids", torch.int32).view(rows, length)
        if self.labels and self.stored_labels:
            labels = field("labels", torch.int32).view(rows, length).to(tdt["labels"], copy=True)
            if self.ignore_index != IGNORE_INDEX:
                labels.masked_fill_(labels == IGNORE_INDEX, self.ignore_index)
            if self.shift_labels:
                shifted = torch.full_like(labels, self.ignore_index)
                shifted[:, :-1] = labels[:, 1:]
                labels = shifted
            out["labels"] = labels
        elif self.labels:
            labels = ids32.to(tdt["labels"], copy=True).masked_fill_(~mask, self.ignore_index)
            if pos is not None:
                labels.masked_fill_(pos == self.position_start, self.ignore_index)
            if self.shift_labels:
                shifted = torch.full_like(labels, self.ignore_index)
                shifted[:, :-1] = labels[:, 1:]
                labels = shifted
            out["labels"] = labels
        if pos is not None:
            if "position_ids" in want:
                out["position_ids"] = pos if tdt["position_ids"] == torch.int32 else pos.to(tdt["position_ids"])
            if "cu_seqlens" in want:
                out["cu_seqlens"] = field("cu_seqlens", torch.int32)
        out["index"] = field("index", torch.int64)
        out["lengths"] = lengths
        counts = None
        if self.source_offsets is not None:
            # Sources from the host copy of index and lengths (small), then onto the device.
            host = self._np_sources(b)
            h = {"index": host["index"].astype(np.int64)}
            counts = self._split_sources(h, host["lengths"].astype(np.int64), b.cu_len > 0)
            out["index"] = torch.from_numpy(h["index"]).to(self.device)
            out["source"] = torch.from_numpy(h["source"]).to(self.device)
        done = torch.cuda.Event()
        done.record()
        out = self._select(out)
        self._pending_events[id(out)] = done
        if counts is not None:
            self._source_counts[id(out)] = counts
        if self.stored_labels:
            self._label_counts[id(out)] = (int(b.trained_tokens), int(self._np_sources(b)["lengths"].astype(np.int64).sum()))
        copied.synchronize()  # the slot (or staging buffer) may be reused from here on
        return out

    def _into_static(self, batch: Dict[str, Any]) -> None:
        """Copies a batch's tensors, on the caller's current stream (so after the previous step's reads of the same
        buffers), into the device tensors kept for its shape (made on first use) and puts those in the batch:
        every batch of a shape has the same addresses, as CUDA graphs need (a tensor whose size depends on the
        content, such as a packed batch's index or cu_seqlens, gets a new one when its size changes)."""
        import torch

        bufs = self._static.setdefault(tuple(batch["input_ids"].shape), {})
        for k, v in batch.items():
            buf = bufs.get(k)
            if buf is None or buf.shape != v.shape or buf.dtype != v.dtype:
                buf = bufs[k] = torch.empty_like(v)  # on the current stream: the caller's
            buf.copy_(v)
            batch[k] = buf

    def _stage(self, b: "pb.Batch", counts: Dict[str, int]) -> "tuple[Any, Dict[str, int]]":
        """Copies a gRPC batch's buffers into the stream's pinned staging buffer (grown as needed; reused: the
        previous batch's copy to the device has finished) and returns it with the offset of each buffer."""
        import torch

        _check_bytes(b, counts)
        offs, total = {}, 0
        for name, _ in _FIELDS:
            offs[name] = total
            total += (len(getattr(b, name)) + 63) // 64 * 64
        if self._staging is None or self._staging.numel() < total:
            self._staging = torch.empty(max(total, 1 << 16), dtype=torch.uint8, pin_memory=True)
            self._staging_np = self._staging.numpy()
        for name, _ in _FIELDS:
            data = getattr(b, name)
            if data:
                self._staging_np[offs[name]:offs[name] + len(data)] = np.frombuffer(data, dtype=np.uint8)
        return self._staging, offs

    def _arange(self, n: int) -> Any:
        import torch

        a = self._aranges.get(n)
        if a is None:
            a = torch.arange(n, device=self.device, dtype=torch.int32)
            self._aranges[n] = a
        return a

    def _select(self, out: Dict[str, Any]) -> Dict[str, Any]:
        return {k: out[k] for k in self.keys if k in out}

    def hand_out(self, batch: Dict[str, Any]) -> None:
        """Called on the iterating thread before a CUDA batch is returned: the caller's current stream waits for
        the batch's tensors (made on the side stream; no host wait), and the caching allocator learns that they
        are used on it."""
        if self.cuda:
            import torch

            cur = torch.cuda.current_stream(self.device)
            done = self._pending_events.pop(id(batch), None)
            if done is not None:
                cur.wait_event(done)
            for v in batch.values():
                v.record_stream(cur)
            if self.static_buffers:
                self._into_static(batch)

    def close(self) -> None:
        self._slot_views.clear()
        self._view_plans.clear()
        self._staging = None
        self._staging_np = None
        if self.cuda:
            self._slots.clear()
            self._pending_events.clear()
            self._static.clear()
