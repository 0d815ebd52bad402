"""torch integration: tensors, IterableDataset inside DataLoader workers, torch.distributed ranks, CUDA copies.
Skipped where torch is not importable."""

from __future__ import annotations

import collections
import os
from typing import List

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if os.environ.get("GLOAD_NO_TORCH"):
    pytest.skip("GLOAD_NO_TORCH is set", allow_module_level=True)

import gload  # noqa: E402
from conftest import TRANSPORTS, WORKERS_CONTEXT, rows_of, PATIENCE# noqa: E402
from torch.utils.data import DataLoader  # noqa: E402


def make(server, transport, **kw):
    kw.setdefault("connect_timeout", PATIENCE)
    kw.setdefault("keys", "all")  # index and lengths too: the tests check rows and padding
    return gload.Loader(server.addr, kw.pop("dataset", "small"), transport=transport, **kw)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tensors(server, transport):
    with make(server, transport, batch_size=4) as l:
        assert isinstance(l, torch.utils.data.IterableDataset)
        b = next(iter(l))
    assert b["input_ids"].dtype == torch.long and b["attention_mask"].dtype == torch.long
    assert b["labels"].dtype == torch.long and b["index"].dtype == torch.int64 and b["lengths"].dtype == torch.int32
    mask = torch.arange(b["input_ids"].shape[1])[None, :] < b["lengths"][:, None].long()
    assert torch.equal(b["attention_mask"].bool(), mask)
    assert torch.equal(b["labels"], b["input_ids"].masked_fill(~mask, -100))
    b["input_ids"][0, 0] = 7  # the caller owns the tensors


def test_dtype_int32(server):
    with make(server, "shm", batch_size=4, dtype=torch.int32, policy="packed", seq_len=128) as l:
        b = next(iter(l))
    assert b["input_ids"].dtype == torch.int32 and b["position_ids"].dtype == torch.int32
    assert b["cu_seqlens"].dtype == torch.int32


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_dataloader_workers_exactly_once(server, datasets, transport):
    """2 ranks × DataLoader(num_workers=2): the loader shards itself by worker; every row once, and the rank's
    batches come in plan order."""
    world = 2
    counts = collections.Counter()
    lens = []
    for rank in range(world):
        ds = make(server, transport, batch_size=4, rank=rank, world_size=world)
        dl = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=WORKERS_CONTEXT)
        bs = list(dl)
        lens.append(len(bs))
        assert len(bs) == len(ds) == len(dl)
        counts.update(rows_of(bs))
        # Plan order: the same as one consumer without workers.
        with make(server, transport, batch_size=4, rank=rank, world_size=world) as single:
            assert rows_of(bs) == rows_of(single)
        ds.close()
    assert lens[0] == lens[1]
    assert max(counts.values()) == 1
    assert datasets.rows["small"] - len(counts) <= 4


def test_dataloader_state_in_main_process(server, datasets):
    """With workers, the main process resumes from the number of batches it took: state_dict(batches=n)."""
    ds = make(server, "shm", batch_size=4)
    dl = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=WORKERS_CONTEXT)
    it = iter(dl)
    first = [next(it) for _ in range(9)]
    state = ds.state_dict(batches=9)
    del it
    ds2 = make(server, "shm", batch_size=4)
    ds2.load_state_dict(state)
    rest = list(DataLoader(ds2, batch_size=None, num_workers=1, multiprocessing_context=WORKERS_CONTEXT))
    assert sorted(rows_of(first + rest)) == list(range(datasets.rows["small"]))
    ds.close()
    ds2.close()


@pytest.mark.parametrize("ctx", ["fork", "forkserver"])
def test_dataloader_after_parent_used_grpc(server, ctx):
    """The parent talked to the server before its workers start (len(), shapes()): workers make their own channel.
    With a grpcio that cannot work after fork, a forked worker fails at once with ForkUnsafe (never aborts, hangs)."""
    ds = make(server, "grpc", batch_size=16)
    if ctx == "fork" and not gload._channel.grpc_fork_safe():
        len(ds)
        with pytest.raises(Exception, match="cannot be used after such a fork") as e:
            list(DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context="fork"))
        assert "multiprocessing_context='spawn' or 'forkserver'" in str(e.value)
        # (the first call of this test session that talked to a server: len(loader) when this test runs alone)
        assert "The parent first talked to it in " in str(e.value), "the error names the call that counted"
        assert "len(loader), shapes()" in str(e.value), "the error says that metadata calls count"
        ds.close()
        return
    n = len(ds)
    ds.shapes()
    for _ in range(2):  # two epochs: new workers each time
        assert len(list(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=WORKERS_CONTEXT))) == n
    ds.close()


def test_distributed_rank(server, tmp_path):
    """torch.distributed's rank and world size are picked up when initialised; explicit arguments win."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        l = make(server, "grpc", batch_size=4)
        assert l._consumer() == (0, 1, 0, 1)
        l2 = make(server, "grpc", batch_size=4, rank=1, world_size=3)
        assert l2._consumer() == (1, 3, 0, 1)
    finally:
        dist.destroy_process_group()


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@cuda
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("policy", ["bucketed", "packed"])
def test_cuda(server, datasets, transport, policy):
    """device='cuda': the same batches as the CPU path, on the GPU; the shm ring is registered (pinned)."""
    kw = dict(batch_size=4) if policy == "bucketed" else dict(policy="packed", batch_size=2, seq_len=256)
    with make(server, transport, device="cuda", prefetch=4, **kw) as g, make(server, transport, **kw) as c:
        gb, cb = list(g), list(c)
        if transport == "shm":
            assert g._stream is None  # closed at the end of the epoch
    assert len(gb) == len(cb)
    for a, b in zip(gb, cb):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k].is_cuda and torch.equal(a[k].cpu(), b[k])
    assert sorted(rows_of(gb)) == list(range(datasets.rows["small"]))


@cuda
def test_cuda_shm_is_served_by_the_native_copier(server):
    with make(server, "shm", device="cuda", batch_size=4) as l:
        next(iter(l))
        assert l._stream.native, l._stream.native_why


@cuda
@pytest.mark.parametrize("native", [True, False], ids=["native-copier", "ring-reader"])
def test_cuda_doorbell_no_host_wait(server, datasets, monkeypatch, native):
    """device='cuda' over shm is a doorbell stream read by the native copier's thread (or, without it, the ring-reader
    thread): the copy out of the slot is queued on a side stream, the slot goes back in order, and the epoch is exact
    while the training stream is kept busy (a long kernel queued before each next(): the copies on the side stream
    must not wait for it on the host)."""
    if not native:
        monkeypatch.setattr(gload._native, "AVAILABLE", False)
    busy = torch.randn(2048, 2048, device="cuda")
    with make(server, "shm", device="cuda", prefetch=2, batch_size=4) as g, make(server, "shm", batch_size=4) as c:
        it = iter(g)
        gb = []
        for b in it:
            for _ in range(4):
                busy = busy @ busy / 2048  # keeps the caller's stream busy for a while
            gb.append({k: v.clone() for k, v in b.items()})
            st = g._stream
            if st is not None:
                assert st.doorbell and (st.native if native else st._ring_reader is not None), st.native_why
        cb = list(c)
    torch.cuda.synchronize()
    assert len(gb) == len(cb)
    for a, b in zip(gb, cb):
        for k in a:
            assert torch.equal(a[k].cpu(), b[k]), k
    assert sorted(rows_of(gb)) == list(range(datasets.rows["small"]))


@cuda
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cuda_static_buffers_and_graph(server, transport):
    """static_buffers=True: every batch of a shape in the same device tensors, so a CUDA graph captured on the first
    batch replays on every later one of that shape and sees each batch's values."""
    kw = dict(batch_size=4, pad_multiple=256, max_length=256, keys=["input_ids", "attention_mask", "labels"])
    with make(server, transport, device="cuda", static_buffers=True, **kw) as g, make(server, transport, **kw) as c:
        want = list(c)
        graphs, ptrs = {}, {}
        sums = []
        s = torch.cuda.Stream()
        for b in g:
            shape = tuple(b["input_ids"].shape)
            ptr = {k: v.data_ptr() for k, v in b.items()}
            assert ptrs.setdefault(shape, ptr) == ptr, "a shape's buffers moved"
            if shape not in graphs:
                out = torch.empty((), dtype=torch.int64, device="cuda")
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):  # warm-up outside capture, as torch's docs ask
                    out.copy_((b["input_ids"] * b["attention_mask"]).sum() + (b["labels"] >= 0).sum())
                torch.cuda.current_stream().wait_stream(s)
                graph = torch.cuda.CUDAGraph()
                # thread_local: gload's reader thread keeps copying (and waiting for its copies) during the capture
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    out.copy_((b["input_ids"] * b["attention_mask"]).sum() + (b["labels"] >= 0).sum())
                graphs[shape] = (graph, out)
            graph, out = graphs[shape]
            graph.replay()
            sums.append(out.item())
    assert len(sums) == len(want) > 2
    assert sums == [int((w["input_ids"] * w["attention_mask"]).sum() + (w["labels"] >= 0).sum()) for w in want]


def test_static_buffers_need_cuda(server):
    with pytest.raises(ValueError, match="static_buffers=True .* needs device='cuda'"):
        make(server, "shm", static_buffers=True)


@pytest.mark.parametrize("ctx", ["fork", "spawn", "forkserver"])
def test_dataloader_every_start_method(server, datasets, ctx):
    """DataLoader(num_workers=2, multiprocessing_context=ctx): the Loader pickles (spawn, forkserver) or is inherited
    (fork) by its workers, which open their own streams: exactly one epoch, in plan order."""
    from gload.loader import grpc_fork_safe

    if ctx == "fork" and not grpc_fork_safe():
        pytest.skip(f"grpcio {gload.loader.grpc.__version__} < 1.85 cannot work in forked children of a gRPC user "
                    "(gload raises ForkUnsafe: test_dataloader_after_parent_used_grpc[fork])")
    ds = make(server, "shm", batch_size=4)
    assert len(ds) > 0  # the parent used gRPC before the workers start
    bs = list(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=ctx))
    with make(server, "shm", batch_size=4) as single:
        assert rows_of(bs) == rows_of(single)
    ds.close()


def test_zero_copy_refused_in_dataloader_workers(server):
    """A DataLoader worker pickles a batch after its next() gave the slot back: zero_copy views are refused there,
    saying why, instead of handing the main process batches that change under it."""
    ds = make(server, "shm", batch_size=4, zero_copy=True, return_tensors="np")
    with pytest.raises(Exception, match="zero_copy=True inside a DataLoader worker"):
        list(DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context=WORKERS_CONTEXT or "spawn"))
    ds.close()
