"""Process safety: a Loader is a description until iterated. It pickles (spawn/forkserver workers) with its position,
and a forked child never touches the parent's gRPC state — also while the parent holds live streams.

These tests use plain multiprocessing (both Python stacks); the DataLoader versions are in test_torch.py."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import queue
import time
from typing import List, Tuple

import pytest

import gload
from conftest import TRANSPORTS, rows_of, PATIENCE

# Forked children of a process that used gRPC work from grpcio 1.85; older ones abort or hang in the child whatever
# the client does (gload._channel says which versions, and how), so gload refuses there with ForkUnsafe
# (test_fork_refused_clearly_on_unsafe_grpcio runs in every stack).
FORK_SAFE = gload._channel.grpc_fork_safe()
needs_fork_safe_grpc = pytest.mark.skipif(
    not FORK_SAFE, reason=f"grpcio {gload.loader.grpc.__version__} < 1.85 cannot work in forked children of a gRPC "
                          "user (gload raises ForkUnsafe: test_fork_refused_clearly_on_unsafe_grpcio)")


def make(addr: str, transport: str = "shm", **kw) -> gload.Loader:
    kw.setdefault("connect_timeout", PATIENCE)
    kw.setdefault("batch_size", 4)
    kw.setdefault("return_tensors", "np")
    kw.setdefault("keys", "all")  # index too: the tests check rows
    return gload.Loader(addr, kw.pop("dataset", "small"), transport=transport, **kw)


def _worker_rows(loader: gload.Loader, worker: int, workers: int, out) -> None:
    """A child's share of an epoch: the loader (pickled or inherited) as worker ``worker`` of ``workers``."""
    import faulthandler

    faulthandler.dump_traceback_later(60, exit=True)  # a hung child shows where it hangs, and ends
    try:
        loader._worker, loader._workers = worker, workers
        out.put((worker, rows_of(loader), None))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        out.put((worker, [], f"{type(e).__name__}: {e}"))


def _epoch_in_children(ctx_name: str, loader: gload.Loader, workers: int = 2) -> List[int]:
    """One epoch split over ``workers`` child processes of start method ``ctx_name``; their rows in plan order
    (round-robin over workers, as DataLoader hands them out)."""
    ctx = mp.get_context(ctx_name)
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker_rows, args=(loader, w, workers, q)) for w in range(workers)]
    for p in procs:
        p.start()
    got = {}
    deadline = time.monotonic() + 120
    while len(got) < workers:
        try:
            w, rows, err = q.get(timeout=0.2)
        except queue.Empty:
            dead = [(i, p.exitcode) for i, p in enumerate(procs) if i not in got and p.exitcode not in (None, 0)]
            assert not dead, f"{ctx_name} children died before reporting (worker, exit code): {dead}"
            assert time.monotonic() < deadline, f"{ctx_name} children: no answer within 120 s"
            continue
        assert err is None, f"worker {w} ({ctx_name}): {err}"
        got[w] = rows
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0, f"{ctx_name} child exited with {p.exitcode}"
    return sorted(r for rows in got.values() for r in rows)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_pickle_round_trip_mid_epoch(server, transport):
    """A copy pickled after k batches continues where the original stands: same state, same next batches."""
    with make(server.addr, transport) as a:
        it = iter(a)
        first = [next(it) for _ in range(5)]
        blob = pickle.dumps(a)
        state = a.state_dict()
        rest_a = list(it)
    b = pickle.loads(blob)
    try:
        assert b.state_dict() == state
        rest_b = []
        while True:
            try:
                rest_b.append(b.next())
            except StopIteration:
                break
        assert rows_of(rest_b) == rows_of(rest_a)
        assert len(first) + len(rest_b) == len(a)
        # Both ran the epoch to its end: a new for loop on the copy runs the next epoch, as on the original.
        nxt = rows_of(b)
        assert b.epoch == 1 and sorted(nxt) == sorted(rows_of(first) + rows_of(rest_a))
        with a:
            assert nxt == rows_of(a) and a.epoch == 1
    finally:
        b.close()


def test_pickle_never_holds_protocol_objects(server):
    """The pickle holds no protocol message (their classes are an implementation detail) and no connection."""
    with make(server.addr) as a:
        next(iter(a))
        blob = pickle.dumps(a)
    assert b"gload_pb2" not in blob and b"grpc" not in blob
    assert pickle.loads(blob).datasets()[0]["name"]


@pytest.mark.parametrize("ctx", [pytest.param("fork", marks=needs_fork_safe_grpc), "spawn", "forkserver"])
def test_children_of_every_start_method(server, datasets, ctx):
    """Each start method: 2 children split one epoch exactly (every row once, none lost)."""
    with make(server.addr) as whole:
        want = sorted(rows_of(whole))
    loader = make(server.addr)
    assert len(loader) > 0  # the parent talked to the server before the children start
    assert _epoch_in_children(ctx, loader) == want
    loader.close()


@needs_fork_safe_grpc
@pytest.mark.parametrize("live", [1, 3])
def test_fork_with_live_streams_in_parent(server, live):
    """20 forks with 1 or 3 streams open in the parent (mid-epoch, read-ahead in flight): no child aborts, every
    epoch exact, and the parent's streams go on afterwards exactly where they stood."""
    with make(server.addr) as whole:
        want = sorted(rows_of(whole))
    streams: List[Tuple[gload.Loader, object, List[int]]] = []
    for i in range(live):
        ld = make(server.addr, epoch=i)
        it = iter(ld)
        streams.append((ld, it, rows_of([next(it)])))
    loader = make(server.addr)
    for _ in range(20):
        assert _epoch_in_children("fork", loader) == want
    for i, (ld, it, seen) in enumerate(streams):
        seen += rows_of(it)
        with make(server.addr, epoch=i) as ref:
            assert seen == rows_of(ref), f"parent stream {i} lost or repeated batches across the forks"
        ld.close()
    loader.close()


def test_fork_refused_clearly_on_unsafe_grpcio(server, monkeypatch):
    """With a grpcio that cannot work after fork (pretended here by raising the threshold), a fork child of a
    process that used gRPC gets ForkUnsafe naming the fix, before touching gRPC: no abort, no hang."""
    monkeypatch.setattr(gload._channel, "_FORK_SAFE_GRPC", (10**6, 0))
    loader = make(server.addr)
    assert len(loader) > 0  # this process used gRPC
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_worker_rows, args=(loader, 0, 1, q))
    p.start()
    w, rows, err = q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0 and rows == []
    assert err is not None and err.startswith("ForkUnsafe: "), err
    assert "was forked from one that had already talked to a gload server" in err
    assert "multiprocessing_context='spawn' or 'forkserver'" in err
    loader.close()


_EXIT_SCRIPT = r"""
import sys, gload
loaders = []
for transport in ("shm", "grpc"):
    for finished in (False, True):
        l = gload.Loader(sys.argv[1], "small", transport=transport, batch_size=4, return_tensors="np",
                         connect_timeout=float(sys.argv[2]))
        it = iter(l)
        next(it)  # a live stream (and, over shm, a ring) held at exit...
        if finished:  # ...or an epoch run to its end, its stream over, the channel still open
            for _ in it:
                pass
        loaders.append((l, it))
print("ok", flush=True)
sys.exit(0)  # the loaders are still referenced: they go at interpreter finalization
"""


@pytest.mark.parametrize("round_", range(5))
def test_exit_with_open_loaders_does_not_hang(server, round_):
    """A process that exits while Loaders hold live streams ends at once with its own exit code: no channel close
    is left to the interpreter's finalization, where gRPC's threads no longer run (a spawn worker hung there)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, server.addr, str(PATIENCE)], capture_output=True, text=True,
                       timeout=PATIENCE)
    assert (r.returncode, r.stdout.strip()) == (0, "ok"), r.stderr[-2000:]
