"""The native batch copier (gload/_copier.c through gload/_native.py): its conversion against the numpy one for every
key set, dtype, label rule and packing; whole epochs through its thread against gRPC's batches (exactly once, same
bytes, same order), under CPU load, with buffers too small at first, closed mid-epoch, and with the server killed.
The CUDA side of the copier (a DMA from pinned staging, events) runs on the GPU machine (bench/device.sh native
with tests/test_handoff.py and tests/test_torch.py there); here its host conversion is the same function."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import time

import numpy as np
import pytest

from gload import _convert, _native
from gload._proto import gload_pb2 as pb

import gload

from conftest import Server, rows_of
from test_mixture import mix_server  # noqa: F401 - the mixture server fixture

pytestmark = pytest.mark.skipif(not _native.AVAILABLE and not os.environ.get("CI"),
                                reason=f"native copier not built: {_native.WHY_NOT}")


def test_built_in_ci():
    """CI builds the copier (scripts/setup.sh): a missing library must fail there, not skip every test below."""
    assert _native.AVAILABLE, _native.WHY_NOT


def _slot(rng, rows, length, packed, stored, full):
    """A slot's bytes, its layout and header words, and the same batch as a gRPC message."""
    lengths = rng.integers(1, length + 1, rows).astype(np.int32)
    if packed or full:
        lengths[:] = length
    ids = rng.integers(0, 50000, (rows, length)).astype(np.int32)
    index = rng.choice(np.array([0, 1, (1 << 20) - 1, 1 << 20, (1 << 40) - 6, (1 << 40) - 5, 1 << 41]), rows)
    index = np.where(rng.random(rows) < 0.5, index, rng.integers(0, 1 << 42, rows)).astype(np.int64)
    pos = np.tile(np.arange(length, dtype=np.int32) % 7, (rows, 1))
    cu = np.array([0, 7, 14], np.int32)
    labels = np.where(rng.random((rows, length)) < 0.5, -100, ids).astype(np.int32)
    fields = {"input_ids": ids, "lengths": lengths, "index": index, "position_ids": pos if packed else None,
              "cu_seqlens": cu if packed else None, "labels": labels if stored else None}
    layout = pb.SlotLayout()
    buf = bytearray()
    for name in _native._FIELDS:  # every field placed (unused ones empty), 64-byte aligned
        buf += b"\0" * (-len(buf) % 64)
        setattr(layout, name, len(buf))
        a = fields[name]
        if a is not None:
            buf += a.tobytes()
    buf += b"\0" * 64
    slot = np.frombuffer(bytes(buf), dtype=np.uint8)
    cu_len = 3 if packed else 0
    words = (4, 123, 9, rows | length << 32, rows | cu_len << 32, 77)
    b = pb.Batch(seq=3, slot=-1, rows=rows, length=length, pieces=rows, input_ids=ids.tobytes(),
                 lengths=lengths.tobytes(), index=index.tobytes(), trained_tokens=77)
    if packed:
        b.position_ids, b.cu_seqlens, b.cu_len = pos.tobytes(), cu.tobytes(), cu_len
    if stored:
        b.labels = labels.tobytes()
    return slot, layout, words, b


class _Conv:
    """What config_for reads of a Converter."""

    def __init__(self, ref, keys):
        self.keys, self._dtypes = keys, ref._dtypes
        self.stored_labels, self.shift_labels = ref.stored_labels, ref.shift_labels
        self.ignore_index, self.position_start = ref.ignore_index, ref.position_start
        self.source_offsets = ref.source_offsets


def _native_batch(cfg, slot, words, conv):
    out, info = _native.convert_one(cfg, slot, words)
    info = info.tolist()
    if cfg.sources:  # the rows and tokens per source, after the keys
        n = cfg.sources
        counts = np.ndarray((2 * n,), np.int64, out, info[_native.I_COUNTS])
        info.append((counts[:n].copy(), None if info[_native.I_CU_LEN] else counts[n:].copy()))
    got = {}
    rows, length = info[_native.I_ROWS], info[_native.I_LENGTH]
    for k in conv.keys:
        off = info[_native.I_OFF + _native._KEY_CODE[k]]
        if off == _native._ABSENT:
            continue
        shape = (rows, length) if k in _native._TWO_D else (_native.Copier._count(k, info),)
        got[k] = np.ndarray(shape, _native._key_dtype(conv, k), out, off)
    return got, info


KEYS = [("input_ids", "attention_mask"), ("input_ids", "attention_mask", "labels", "index", "lengths"),
        ("input_ids", "labels", "position_ids", "cu_seqlens"), ("labels", "lengths", "input_ids", "attention_mask"),
        ("input_ids", "attention_mask", "labels", "position_ids", "cu_seqlens", "index", "lengths"),
        ("input_ids", "index", "source", "lengths"), ("input_ids", "attention_mask")]


@pytest.mark.parametrize("keys,mixture", list(zip(KEYS, [False] * 5 + [True, True])),
                         ids=["ids+mask", "ids+mask+labels+index+lengths", "packed-keys", "reordered", "all",
                              "mixture", "mixture-no-index-key"])
def test_conversion_equals_numpy(keys, mixture):
    rng = np.random.default_rng(1)
    for packed, stored, shift, ignore, dt, start, full in itertools.product(
            [False, True], [False, True], [False, True], [-100, -1], ["int64", "int32"], [0, 1], [False, True]):
        if packed and not full:
            continue
        if mixture and (stored or shift or ignore != -100 or start):
            continue  # (the mixture split does not depend on those)
        dtypes = {k: np.dtype(dt) for k in ("input_ids", "attention_mask", "labels", "position_ids")}
        ref = _convert.Converter(tensors="np", device=None, dtypes=dtypes, labels="labels" in keys,
                                 position_start=start, keys=keys, ring=None, layout=None, shift_labels=shift,
                                 ignore_index=ignore)
        ref.stored_labels = stored
        if mixture:  # three sources; the slot's index entries fall into all of them (and onto their first rows)
            ref.source_offsets = np.array([0, 1 << 20, (1 << 40) - 5], dtype=np.int64)
        conv = _Conv(ref, keys)
        for rows, length in ((4, 32), (3, 17), (1, 1)):
            slot, layout, words, b = _slot(rng, rows, length, packed, stored, full)
            cfg = _native.config_for(conv, None, layout, None, 1)
            cfg.slot_bytes = len(slot)
            want = ref.convert(b)
            got, info = _native_batch(cfg, slot, words, conv)
            if mixture:
                wr, wt = ref.pop_source_counts(want)
                gr, gt = info[-1]
                assert np.array_equal(gr, wr) and (gt is None) == (wt is None), (gr, wr)
                assert wt is None or np.array_equal(gt, wt), (gt, wt)
            case = dict(keys=keys, packed=packed, stored=stored, shift=shift, ignore=ignore, dtype=dt, start=start,
                        full=full, shape=(rows, length))
            assert list(got) == list(want), case
            for k in want:
                assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), (k, case)
            assert info[_native.I_REAL] == int(np.frombuffer(b.lengths, np.int32).sum())
            assert info[_native.I_TRAINED] == 77 and info[_native.I_RANK_STEP] == 0  # (set by the thread, not here)


@pytest.mark.parametrize("field", ["input_ids", "lengths", "labels"])
def test_field_past_the_slot_is_an_error(field):
    rng = np.random.default_rng(2)
    slot, layout, words, _ = _slot(rng, 4, 32, False, True, False)
    ref = _convert.Converter(tensors="np", device=None, dtypes={}, labels=True, position_start=0,
                             keys=("input_ids", "labels"), ring=None, layout=None)
    ref.stored_labels = True
    cfg = _native.config_for(_Conv(ref, ref.keys), None, layout, None, 1)
    cfg.slot_bytes = getattr(layout, field) + 8  # the field starts inside the slot but does not fit
    with pytest.raises(gload.errors.ProtocolError, match="does not fit its slot"):
        _native.convert_one(cfg, slot, words)


def _guarded(nbytes):
    """nbytes of memory ending right before a PROT_NONE page: a read past them kills the process (a failed test)."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    size = (nbytes + page - 1) // page * page
    mm = mmap.mmap(-1, size + page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.mprotect(ctypes.c_void_p(base + size), ctypes.c_size_t(page), 0) == 0, ctypes.get_errno()
    arr = np.frombuffer(mm, dtype=np.uint8, count=nbytes, offset=size - nbytes)
    return mm, arr


def test_garbled_headers_and_layouts_stay_inside_the_slot():
    """Random header words (shapes, pieces, cu_len up to 2^32-1) and random layouts (offsets inside, at and past the
    slot's end) against a slot that ends at a guard page: every call returns a batch or an error, none reads past the
    slot (that would be a crash)."""
    rng = np.random.default_rng(3)
    slot_bytes = 3 * 4096 - 8
    mm, slot = _guarded(slot_bytes)
    slot[:] = rng.integers(0, 256, slot_bytes, dtype=np.uint8)
    ok = errors = 0
    for i in range(3000):
        keys = tuple(k for k in _native.KEYS if rng.random() < 0.6) or ("input_ids",)
        ref = _convert.Converter(tensors="np", device=None, dtypes={}, labels="labels" in keys, position_start=0,
                                 keys=keys, ring=None, layout=None, shift_labels=bool(i % 2))
        ref.stored_labels = bool(rng.random() < 0.5)
        layout = pb.SlotLayout()
        for name in _native._FIELDS:
            r = rng.random()
            setattr(layout, name, int(rng.integers(0, slot_bytes // 8)) if r < 0.8 else
                    int(rng.choice([rng.integers(0, slot_bytes + 64), slot_bytes])))
        small = lambda hi: int(rng.integers(0, hi) if rng.random() < 0.9 else rng.integers(0, 2**32))  # noqa: E731
        rows, length, pieces, cu = small(8), small(40), small(8), small(8) * int(rng.random() < 0.5)
        words = (1, 0, 0, rows | length << 32, pieces | cu << 32, 0)
        cfg = _native.config_for(_Conv(ref, keys), None, layout, None, 1)
        cfg.slot_bytes = slot_bytes
        try:
            _native.convert_one(cfg, slot, words)
            ok += 1
        except gload.errors.ProtocolError:
            errors += 1
    assert ok > 300 and errors > 300, (ok, errors)
    del slot
    mm.close()


def _epoch(addr, dataset, transport, **kw):
    loader = gload.Loader(addr, dataset, transport=transport, **kw)
    batches = list(loader)
    return loader, batches


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert list(x) == list(y)
        for k in x:
            assert np.array_equal(np.asarray(x[k]), np.asarray(y[k])), k


@pytest.mark.parametrize("policy", ["bucketed", "packed"])
def test_epoch_through_the_copier_equals_grpc(server: Server, policy):
    kw = dict(batch_size=8, seed=5, labels=True, keys="all", policy=policy)
    if policy == "packed":
        kw.update(batch_size=2, seq_len=256, position_start=1)
    loader = gload.Loader(server.addr, "small", transport="shm", **kw)
    it = iter(loader)
    native = [next(it)]
    assert loader._stream.native, loader._stream.native_why
    native += list(it)
    assert loader._stats.steps == len(native)
    _, ref = _epoch(server.addr, "small", "grpc", **kw)
    _same(native, ref)
    assert sorted(rows_of(native)) == sorted(rows_of(ref))


def test_the_copier_serves_shm_numpy_streams(server: Server):
    loader = gload.Loader(server.addr, "small", batch_size=8, transport="shm")
    it = iter(loader)
    next(it)
    assert loader._stream.native, loader._stream.native_why
    loader.close()


def test_small_buffers_grow(server: Server, monkeypatch):
    """Output buffers sized below the first batches: the copier asks for larger ones (S_NEED) and the epoch is the
    same."""
    monkeypatch.setattr(_native.Copier, "_initial_cap", lambda self, opened: 4096)
    kw = dict(batch_size=16, seed=2, labels=True)
    _, native = _epoch(server.addr, "small", "shm", **kw)
    _, ref = _epoch(server.addr, "small", "grpc", **kw)
    _same(native, ref)


def test_mixture_epoch_through_the_copier_equals_grpc(mix_server):
    """A weighted mixture's epoch over shm through the copier (the index split per source, the source key, the rows
    and tokens counted per source) against gRPC's Python split: the same batches and the same source counts."""
    kw = dict(batch_size=8, seed=3, return_tensors="np", keys=("input_ids", "index", "source", "lengths"))
    with gload.Loader(mix_server.addr, "pretrain", transport="shm", **kw) as ld:
        it = iter(ld)
        got = [next(it)]
        assert ld._stream.native, ld._stream.native_why
        got += list(it)
        counts = ld.source_counts()
    with gload.Loader(mix_server.addr, "pretrain", transport="grpc", **kw) as ld:
        ref = list(ld)
        ref_counts = ld.source_counts()
    _same(got, ref)
    assert counts == ref_counts and len(counts) == 3, (counts, ref_counts)


def test_kept_batches_are_never_rewritten(server: Server):
    """The copier's numpy buffers come back to it only when nothing refers to them: batches (or one key of them, or a
    view of a key) kept across the epoch still hold what they held when handed out, while the dropped ones' buffers
    are reused."""
    loader = gload.Loader(server.addr, "small", batch_size=4, transport="shm", prefetch=4, labels=True,
                          return_tensors="np")
    kept, copies = [], []
    reused = 0
    for n, b in enumerate(loader):
        c = loader._stream._copier if loader._stream is not None else None
        if n % 3 == 0:
            kept.append(b)
            copies.append({k: v.copy() for k, v in b.items()})
        elif n % 3 == 1:
            kept.append({"labels": b["labels"][1:]})  # a view of one key keeps the whole buffer
            copies.append({"labels": b["labels"][1:].copy()})
        if c is not None:
            reused = max(reused, c.reused)
    for b, want in zip(kept, copies):
        for k in want:
            assert np.array_equal(b[k], want[k]), k
    assert reused > 0, "no buffer was given to the copier again"


def test_a_copier_that_cannot_start_leaves_the_python_path(server: Server, monkeypatch, caplog):
    """The copier failing to start (a CUDA driver without its calls, say) costs a warning, not the epoch: the stream
    is converted in Python, the same batches."""
    def broken(self, *args, **kw):
        raise gload.errors.ProtocolError("native copier: libcuda.so.1 has no cuCtxPushCurrent_v2")

    kw = dict(batch_size=8, seed=4, labels=True)
    _, ref = _epoch(server.addr, "small", "grpc", **kw)
    monkeypatch.setattr(_native.Copier, "__init__", broken)
    monkeypatch.setattr(_native.Copier, "__del__", lambda self: None)
    with caplog.at_level("WARNING", logger="gload"):
        loader, got = _epoch(server.addr, "small", "shm", **kw)
    _same(got, ref)
    assert "converted in Python" in caplog.text


def _burn(stop):
    while not stop.is_set():
        sum(i * i for i in range(10000))


def test_epochs_under_cpu_load(server: Server):
    """Three epochs with twice as many CPU-bound processes as cores beside the client, the server and the copier's
    thread: every row exactly once, the same batches as an unloaded gRPC epoch."""
    kw = dict(batch_size=4, seed=9, labels=True, prefetch=2)
    _, ref = _epoch(server.addr, "small", "grpc", **kw)
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    burners = [ctx.Process(target=_burn, args=(stop,), daemon=True) for _ in range(2 * (os.cpu_count() or 1))]
    for p in burners:
        p.start()
    try:
        for _ in range(3):
            _, native = _epoch(server.addr, "small", "shm", **kw)
            _same(native, ref)
    finally:
        stop.set()
        for p in burners:
            p.join(10)


def test_close_mid_epoch_and_again(server: Server):
    """close() while the copier's thread runs (and waits for a free entry): joined, no ring left mapped under it;
    a new epoch after it is whole."""
    for _ in range(5):
        loader = gload.Loader(server.addr, "small", batch_size=4, transport="shm", prefetch=4)
        it = iter(loader)
        next(it)
        time.sleep(0.01)  # the copier fills every entry and sleeps
        loader.close()
    loader, native = _epoch(server.addr, "small", "shm", batch_size=4)
    _, ref = _epoch(server.addr, "small", "grpc", batch_size=4)
    _same(native, ref)


def test_close_from_another_thread_while_next_waits(fresh_server: Server):
    """Loader.close() on another thread while next() sleeps in the copier's wait (the server stopped with SIGSTOP, so
    no batch comes): next() ends with an error or the end of the epoch within a second or so, and nothing crashes."""
    import signal
    import threading

    fresh_server.start()
    loader = gload.Loader(fresh_server.addr, "small", batch_size=1, transport="shm", prefetch=2, timeout=30,
                          reconnect_timeout=0)
    it = iter(loader)
    next(it)
    for _ in range(2):
        next(it)  # the ring's batches are gone: the next next() waits
    got = []

    def drain():
        try:
            for _ in it:
                pass
            got.append("end")
        except Exception as e:  # noqa: BLE001 - what next() raised is the result
            got.append(e)

    os.kill(fresh_server.pid, signal.SIGSTOP)
    try:
        t = threading.Thread(target=drain)
        t.start()
        time.sleep(0.2)
        t0 = time.monotonic()
        loader.close()
        t.join(10)
        assert not t.is_alive() and time.monotonic() - t0 < 5, "next() still waits after close()"
        assert got and (got[0] == "end" or isinstance(got[0], gload.errors.GloadError)), got
    finally:
        os.kill(fresh_server.pid, signal.SIGCONT)


def test_server_killed_under_the_copier(fresh_server: Server):
    """kill -9 of the server while the copier waits for batches: next() raises (no hang, no crash of the
    process)."""
    fresh_server.start()
    loader = gload.Loader(fresh_server.addr, "small", batch_size=1, transport="shm", prefetch=2, timeout=20,
                          reconnect_timeout=0)
    it = iter(loader)
    next(it)
    fresh_server.kill()
    t0 = time.monotonic()
    with pytest.raises(gload.errors.GloadError):
        for _ in it:
            pass
    assert time.monotonic() - t0 < 15


try:
    import torch
except ImportError:
    torch = None
cuda = pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="no CUDA device (runs on the GPU machine)")


@cuda
@pytest.mark.parametrize("small", [False, True], ids=["sized", "buffers-grow"])
@pytest.mark.parametrize("policy", ["bucketed", "packed"])
def test_cuda_epoch_through_the_copier_equals_grpc(server: Server, monkeypatch, policy, small):
    """device='cuda' through the copier (pinned staging, one DMA on its side stream, the loop's stream waiting on the
    copy's event): the same tensors as gRPC's CPU batches, with the training stream kept busy and the batches kept
    alive past several steps (their buffers must not be reused under them)."""
    if small:
        monkeypatch.setattr(_native.Copier, "_initial_cap", lambda self, opened: 4096)
    kw = dict(batch_size=8, seed=5, labels=True, keys="all", policy=policy, dtype={"attention_mask": torch.int32})
    if policy == "packed":
        kw.update(batch_size=2, seq_len=256, position_start=1)
    loader = gload.Loader(server.addr, "small", transport="shm", device="cuda", prefetch=4, **kw)
    busy = torch.randn(1024, 1024, device="cuda")
    got = []
    for b in loader:
        assert loader._stream is None or loader._stream.native, loader._stream.native_why
        for _ in range(2):
            busy = busy @ busy / 1024
        got.append(b)  # kept: every batch stays alive to the end
    torch.cuda.synchronize()
    _, ref = _epoch(server.addr, "small", "grpc", return_tensors="pt", **kw)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        assert list(a) == list(b)
        for k in a:
            assert a[k].is_cuda and torch.equal(a[k].cpu(), b[k]), k
