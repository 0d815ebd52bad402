"""The CUDA conversion's host side (issue 14): every key of a device="cuda" batch is made on the host into a pinned
staging buffer and reaches the device in one copy, as views of one device buffer. Checked here against the numpy
conversion for every key set, dtype, label rule and packing, on a machine without a GPU: the CUDA calls (streams,
events, pinned memory, record_stream) are replaced by no-ops and the "device" is the CPU — the real path runs in
bench/device.sh native's CUDA tests on the GPU machine. Skipped where torch is not importable."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gload import _convert  # noqa: E402
from gload._proto import gload_pb2 as pb  # noqa: E402


class _Event:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass


class _Stream:
    def __init__(self, device=None):
        pass


@pytest.fixture
def no_cuda(monkeypatch):
    """CUDA's host-side calls as no-ops, pinned allocations as plain ones."""
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: _Stream())
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, pin_memory=False, **k: empty(*a, **k))
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, s: None)


def _batch(rng, rows, length, packed, stored_labels):
    lengths = rng.integers(1, length + 1, rows).astype(np.int32)
    if packed:
        lengths[:] = length
    ids = rng.integers(0, 1000, (rows, length)).astype(np.int32)
    b = pb.Batch(seq=3, slot=-1, rows=rows, length=length, pieces=rows, input_ids=ids.tobytes(),
                 lengths=lengths.tobytes(), index=np.arange(rows, dtype=np.int64).tobytes())
    if packed:
        b.position_ids = np.tile(np.arange(length, dtype=np.int32) % 7, (rows, 1)).tobytes()
        b.cu_seqlens = np.array([0, 7, 14], np.int32).tobytes()
        b.cu_len = 3
    if stored_labels:
        b.labels = np.where(rng.random((rows, length)) < 0.5, -100, ids).astype(np.int32).tobytes()
    return b


KEYS = [("input_ids", "attention_mask"), ("input_ids", "attention_mask", "labels", "index", "lengths"),
        ("input_ids", "labels", "position_ids", "cu_seqlens")]


@pytest.mark.parametrize("keys", KEYS, ids=["ids+mask", "ids+mask+labels+index+lengths", "packed-keys"])
def test_cuda_batch_equals_numpy_batch(no_cuda, keys):
    rng = np.random.default_rng(0)
    for packed, stored, shift, ignore, dt in itertools.product([False, True], [False, True], [False, True],
                                                                 [-100, -1], ["int64", "int32"]):
        dtypes = {k: np.dtype(dt) for k in ("input_ids", "attention_mask", "labels", "position_ids")}
        kw = dict(dtypes=dtypes, labels="labels" in keys, position_start=0, keys=keys, ring=None, layout=None,
                  shift_labels=shift, ignore_index=ignore)
        cuda = _convert.Converter(tensors="pt", device="cpu", **kw)
        # The CUDA converter's state, on the CPU (its constructor makes it only for a CUDA device).
        cuda.cuda, cuda._stream, cuda._free_events, cuda._pending, cuda._stagings = True, _Stream(), [], {}, {}
        cuda._np_to_torch = {np.dtype(np.int64): torch.int64, np.dtype(np.int32): torch.int32}
        ref = _convert.Converter(tensors="np", device=None, **kw)
        cuda.stored_labels = ref.stored_labels = stored
        for rows, length in ((4, 32), (3, 17), (4, 32)):  # the staging buffer reused across shapes
            b = _batch(rng, rows, length, packed, stored)
            got, want = cuda.convert(b), ref.convert(b)
            cuda.hand_out(got)
            case = dict(packed=packed, stored=stored, shift=shift, ignore=ignore, dtype=dt, shape=(rows, length))
            assert list(got) == list(want), case
            for k in want:
                g = got[k].numpy()
                assert g.dtype == want[k].dtype and np.array_equal(g, want[k]), (k, case)
            assert not cuda._pending, "hand_out keeps the batch's buffer"
