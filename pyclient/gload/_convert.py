"""Turning one wire batch into the dict a training loop gets: numpy arrays, torch CPU tensors, or torch tensors on a
CUDA device (made on the host into a pinned staging buffer, then one non-blocking DMA on a side stream).

Every array or tensor handed out is owned by the caller and writable: the data is copied out of the gRPC message or
the shared-memory slot, so the slot can be returned to the server as soon as the copy is done (zero_copy views are
the one exception, documented on the Loader).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np

from . import _keys
from ._proto import gload_pb2 as pb
from ._ring import Ring
from .errors import ProtocolError


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
    """Converts wire batches of one stream. ``convert`` runs on the stream's reader thread (gRPC, shm messages) or
    on the thread that iterates (the shm doorbell); ``hand_out`` on the thread that iterates."""

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
                self._free_events: list = []  # CUDA events whose copy is done, to record again
                self._pending: Dict[int, Any] = {}  # id(batch dict) -> its device buffer, until handed out
                self._stagings: Dict[int, Any] = {}  # slot (-1: gRPC) -> (pinned tensor, its numpy view)
                self._np_to_torch = {np.dtype(d): t for d, t in (
                    (np.int64, torch.int64), (np.int32, torch.int32), (np.int16, torch.int16),
                    (np.uint8, torch.uint8), (np.bool_, torch.bool), (np.float32, torch.float32),
                    (np.float16, torch.float16))}
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
        out, counts, lengths = self._np_batch(b, self.zero_copy)
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

    def _np_batch(self, b: "pb.Batch", views: bool) -> "tuple[Dict[str, np.ndarray], Any, np.ndarray]":
        """The user's keys of batch b as numpy arrays (views: a key the slot or message holds in the wanted dtype
        is a read-only view of it, not a copy), with the batch's (rows, tokens) per source (mixtures; else None)
        and its row lengths."""
        src = self._np_sources(b)
        rows, length = b.rows, b.length
        dt = self._dtypes
        want = self.keys
        ids32 = src["input_ids"].reshape(rows, length)
        # views: keys in the slot's dtype are the slot's own (read-only) memory; otherwise each key is a copy.
        take = (lambda a, d: a if a.dtype == d else a.astype(d)) if views else (lambda a, d: a.astype(d))
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
        return self._select(out), counts, lengths

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
        """Batch b on the device with one host-to-device copy: every key is made on the host (numpy, as for CPU
        batches: views of the slot where nothing changes, the mask and labels computed) straight into a pinned
        staging buffer, which one DMA on the side stream takes to the device; the tensors handed out are views of
        that one device buffer. Kernel launches cost the calling thread more than the host work (the first version
        launched four to ten per batch on the side stream: 4.9k batches/s of 16×1024 on the H200 host, 6.4k now).

        Returns when the copy is done (the thread that converts waits for it, not the training loop): the staging
        buffer — the slot's own for slot batches, one per stream for gRPC batches — may then be rewritten, and the
        tensors are ready for any stream. Converting on the caller's thread instead (the copy's event returning the
        slot later) was measured and dropped: next() then pays the CUDA calls, 3.7% data wait on train_ref's small
        model against 0.8% (docs/performance.md)."""
        import torch

        out, counts, lengths = self._np_batch(b, True)
        slot = b.slot if b.slot >= 0 else -1
        spans = []
        end = 0
        for k, a in out.items():
            spans.append((k, end, a))
            end += (a.nbytes + 63) // 64 * 64
        stage, stage_np = self._staging_for(slot, end)
        for _, off, a in spans:
            np.copyto(stage_np[off:off + a.nbytes].view(a.dtype).reshape(a.shape), a)
        with torch.cuda.stream(self._stream):
            gpu = stage[:end].to(self.device, non_blocking=True)
            copied = self._event()
            copied.record(self._stream)
        tdt = self._np_to_torch
        res = {k: gpu[off:off + a.nbytes].view(tdt[a.dtype]).view(a.shape) for k, off, a in spans}
        copied.synchronize()  # the staging buffer may be rewritten from here on
        self._free_events.append(copied)
        self._pending[id(res)] = gpu
        if counts is not None:
            self._source_counts[id(res)] = counts
        if self.stored_labels:
            self._label_counts[id(res)] = (int(b.trained_tokens), int(lengths.sum()))
        return res

    def _staging_for(self, slot: int, size: int) -> "tuple[Any, np.ndarray]":
        """The pinned staging buffer of a slot (-1: gRPC batches), at least size bytes (made, or grown, on use)."""
        have = self._stagings.get(slot)
        if have is not None and have[1].nbytes >= size:
            return have
        import torch

        room = 1 << max(16, (size - 1).bit_length())
        t = torch.empty(room, dtype=torch.uint8, pin_memory=True)
        have = self._stagings[slot] = (t, t.numpy())
        return have

    def _event(self) -> Any:
        """A CUDA event to record (one of the pool, or a new one)."""
        if self._free_events:
            return self._free_events.pop()
        import torch

        return torch.cuda.Event()

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

    def _select(self, out: Dict[str, Any]) -> Dict[str, Any]:
        return {k: out[k] for k in self.keys if k in out}

    def hand_out(self, batch: Dict[str, Any]) -> None:
        """Called on the iterating thread before a CUDA batch is returned: the caching allocator learns that the
        batch's device buffer (allocated on the side stream, its copy already done) is used on the caller's current
        stream; with static_buffers the batch moves into the buffers kept for its shape."""
        if self.cuda:
            gpu = self._pending.pop(id(batch), None)  # (None for the native copier's batches)
            if gpu is not None:
                import torch

                # every tensor of the batch is a view of it (copied: nothing to wait for)
                gpu.record_stream(torch.cuda.current_stream(self.device))
            if self.static_buffers:
                self._into_static(batch)

    def close(self) -> None:
        self._slot_views.clear()
        self._view_plans.clear()
        if self.cuda:
            self._pending.clear()
            self._stagings.clear()
            self._static.clear()
            self._free_events.clear()
