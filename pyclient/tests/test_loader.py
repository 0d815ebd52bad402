"""The client against a real server, numpy path (runs without torch): batches, sharding, state, errors."""

from __future__ import annotations

import collections
import os
import signal
from typing import Dict, List

import numpy as np
import pytest

import gload
from conftest import TRANSPORTS, rows_of, PATIENCE

POLICIES = {
    "bucketed": dict(batch_size=8, pad_multiple=32),
    "tokens": dict(policy="tokens", token_budget=2048, pad_multiple=16),
    "packed": dict(policy="packed", batch_size=2, seq_len=256, position_start=1),
    "auto": dict(batch_size=8, boundaries="auto"),
    # The lazy planners (exact up to 2^27 rows unless asked for): the same guarantees on a small dataset.
    "bucketed-lazy": dict(batch_size=8, pad_multiple=32, planner="lazy"),
    "tokens-lazy": dict(policy="tokens", token_budget=2048, pad_multiple=16, planner="lazy"),
    "packed-lazy": dict(policy="packed", batch_size=2, seq_len=256, position_start=1, planner="lazy"),
}


def make(server, transport: str, **kw) -> gload.Loader:
    kw.setdefault("return_tensors", "np")
    kw.setdefault("connect_timeout", PATIENCE)
    kw.setdefault("keys", "all")  # index and lengths too: the tests check rows and padding
    return gload.Loader(server.addr, kw.pop("dataset", "small"), transport=transport, **kw)


def epoch(loader: gload.Loader) -> List[Dict[str, np.ndarray]]:
    return [b for b in loader]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_epoch_exactly_once(server, datasets, transport, policy):
    with make(server, transport, **POLICIES[policy]) as loader:
        bs = epoch(loader)
        rows = rows_of(bs)
        assert sorted(rows) == list(range(datasets.rows["small"])), "every row exactly once (world 1)"
        assert len(bs) == len(loader)
        seen_shapes = {tuple(b["input_ids"].shape) for b in bs}
        assert seen_shapes == set(loader.shapes())
        # The epoch opens with one batch of every shape, longest first.
        warm = [tuple(b["input_ids"].shape) for b in bs[: len(seen_shapes)]]
        assert warm == loader.shapes()
        pad = {d["name"]: d for d in loader.datasets()}["small"]
        assert pad["pad_from"] == "pad_token" and pad["pad_token"] == "<|pad|>" and pad["pad_id"] > 0
        for b in bs:
            check_batch(b, policy.split("-")[0], pad_id=pad["pad_id"],
                        position_start=POLICIES[policy].get("position_start", 0))


def check_batch(b, policy: str, pad_id: int, position_start: int) -> None:
    ids, mask, labels, lengths = b["input_ids"], b["attention_mask"], b["labels"], b["lengths"]
    rows, length = ids.shape
    assert ids.dtype == np.int64 and mask.dtype == np.int64 and labels.dtype == np.int64  # transformers' dtypes
    assert b["index"].dtype == np.int64 and lengths.dtype == np.int32 and lengths.shape == (rows,)
    want_mask = np.arange(length)[None, :] < lengths[:, None]
    assert (mask == want_mask).all()
    assert (ids[~want_mask] == pad_id).all()
    assert ids.flags.writeable and labels.flags.writeable
    if policy != "packed":
        assert (labels == np.where(want_mask, ids, -100)).all()
        assert b["index"].shape == (rows,) and "position_ids" not in b
        if policy in ("bucketed", "auto"):
            assert length % (32 if policy == "bucketed" else 1) == 0
        return
    pos, cu = b["position_ids"], b["cu_seqlens"]
    assert pos.shape == ids.shape and cu[0] == 0 and cu[-1] == rows * length
    # Segments of cu_seqlens: position ids count up from position_start inside each.
    flat = pos.reshape(-1)
    for a, z in zip(cu[:-1], cu[1:]):
        assert (flat[a:z] == position_start + np.arange(z - a)).all()
    starts = (pos == position_start) & want_mask
    assert starts.sum() == len(b["index"]), "one document start per piece"
    want_labels = np.where(want_mask, ids, -100)
    want_labels[pos == position_start] = -100
    assert (labels == want_labels).all()


def test_contents_match_the_dataset(server, datasets):
    pa = pytest.importorskip("pyarrow")
    ref: List[List[int]] = []
    for f in sorted(os.listdir(datasets.small)):
        if f.endswith(".arrow"):
            with pa.memory_map(str(datasets.small / f)) as src:
                ref += pa.ipc.open_stream(src).read_all().column("input_ids").to_pylist()
    for transport in TRANSPORTS:
        with make(server, transport, batch_size=5, pad_id=-1, pad_multiple=8) as loader:
            for b in loader:
                for r, row in enumerate(b["index"]):
                    n = int(b["lengths"][r])
                    assert n == len(ref[row])
                    assert b["input_ids"][r, :n].tolist() == ref[row]
                    assert (b["input_ids"][r, n:] == -1).all()


def test_transports_agree(server):
    got = {}
    for transport in TRANSPORTS:
        with make(server, transport, batch_size=6, seed=3, epoch=2) as loader:
            got[transport] = epoch(loader)
    assert len(got["grpc"]) == len(got["shm"]) > 0
    for a, b in zip(got["grpc"], got["shm"]):
        assert a.keys() == b.keys()
        for k in a:
            assert np.array_equal(a[k], b[k])


def consume_rank(loaders: List[gload.Loader], limit: int = -1) -> List[dict]:
    """Reads a rank's batches from its workers' loaders in turn (as DataLoader does), at most limit batches."""
    its = [iter(l) for l in loaders]
    out: List[dict] = []
    i = 0
    while limit < 0 or len(out) < limit:
        try:
            out.append(next(its[i % len(its)]))
        except StopIteration:
            break
        i += 1
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ranks_and_workers_exactly_once(server, datasets, transport):
    world, workers = 2, 2
    counts = collections.Counter()
    per_rank = []
    for rank in range(world):
        ls = [make(server, transport, batch_size=4, rank=rank, world_size=world, worker=w, num_workers=workers)
              for w in range(workers)]
        bs = consume_rank(ls)
        per_rank.append(len(bs))
        assert len(bs) == len(ls[0])
        counts.update(rows_of(bs))
        for l in ls:
            l.close()
    assert per_rank[0] == per_rank[1], "every rank gets the same number of batches"
    assert max(counts.values()) == 1, "no row twice"
    missing = datasets.rows["small"] - len(counts)
    assert 0 <= missing <= (world - 1) * 4, "only the remainder that does not divide among ranks is dropped"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_state_round_trip(server, datasets, transport):
    a = make(server, transport, batch_size=8, seed=5)
    it = iter(a)
    first = [next(it) for _ in range(7)]
    state = a.state_dict()
    assert state["consumed"] == 7 and state["epoch"] == 0 and state["seed"] == 5
    assert set(state) >= {"fingerprint", "seed", "epoch", "policy_hash", "consumed", "plan_world"}
    more = [next(it) for _ in range(3)]  # read past the state: these must come again after the resume
    a.close()
    b = make(server, transport, batch_size=8, seed=5)
    b.load_state_dict(state)
    assert b.state_dict() == state
    b.set_epoch(0)  # as a training loop does each epoch: keeps the loaded state
    rest = epoch(b)
    assert rows_of(rest[:3]) == rows_of(more)
    assert sorted(rows_of(first + rest)) == list(range(datasets.rows["small"]))
    b.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_elastic_resume(server, datasets, transport):
    """A 2-rank job (2 workers each) stops after k steps; it resumes with 3 ranks × 1 worker, then 1 rank × 3
    workers: every row once, nothing repeated, only the final remainder dropped."""
    counts = collections.Counter()
    k = 5
    states = []
    for rank in range(2):
        ls = [make(server, transport, batch_size=4, rank=rank, world_size=2, worker=w, num_workers=2)
              for w in range(2)]
        bs = consume_rank(ls, k)
        counts.update(rows_of(bs))
        # The worker that handed out the last batch knows the global state.
        states.append(ls[(k - 1) % 2].state_dict())
        # So does any rank's main process from the step count.
        assert ls[0].state_dict(batches=k)["consumed"] == states[-1]["consumed"] == 2 * k
        for l in ls:
            l.close()
    assert states[0]["consumed"] == states[1]["consumed"]
    state = states[0]
    for rank in range(3):
        l = make(server, transport, batch_size=4, rank=rank, world_size=3)
        l.load_state_dict(state)
        bs = consume_rank([l], 3)
        counts.update(rows_of(bs))
        if rank == 0:
            state2 = l.state_dict()
        l.close()
    assert state2["consumed"] == 2 * k + 3 * 3 and state2["plan_world"] == 2
    ls = [make(server, transport, batch_size=4, worker=w, num_workers=3) for w in range(3)]
    for l in ls:
        l.load_state_dict(state2)
    counts.update(rows_of(consume_rank(ls)))
    assert max(counts.values()) == 1
    assert len(counts) == datasets.rows["small"], "world 1 at the end: nothing dropped"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_worker_states(server, datasets, transport):
    """Per-worker states (what StatefulDataLoader saves) resume each worker's own subsequence."""
    ls = [make(server, transport, batch_size=4, worker=w, num_workers=3) for w in range(3)]
    first = consume_rank(ls, 8)  # workers 0 and 1 handed 3 batches, worker 2 two
    states = [l.state_dict() for l in ls]
    for l in ls:
        l.close()
    # Each worker reopens where its next batch is at its own offset: worker 2's next is step 8 = 6 + 2.
    assert [s["resume_at"] for s in states] == [9, 9, 6], states
    assert max(s["consumed"] for s in states) == 8
    ls = [make(server, transport, batch_size=4, worker=w, num_workers=3) for w in range(3)]
    for l, s in zip(ls, states):
        l.load_state_dict(s)
    rest = consume_rank(ls[2:] + ls[:2])  # worker 2 is next in the round-robin
    assert sorted(rows_of(first + rest)) == list(range(datasets.rows["small"]))


def test_epochs_and_seeds(server):
    def order(**kw):
        with make(server, "grpc", batch_size=8, **kw) as l:
            return rows_of(epoch(l))

    e0 = order(epoch=0)
    assert order(epoch=0) == e0, "an epoch is a pure function of (dataset, seed, epoch, policy)"
    assert order(epoch=1) != e0
    assert order(seed=9) != e0
    l = make(server, "grpc", batch_size=8)
    l.set_epoch(1)
    assert rows_of(epoch(l)) == order(epoch=1)
    assert rows_of(epoch(l)) == order(epoch=2), "a second loop after a finished one runs the next epoch"
    l.set_epoch(1)
    assert rows_of(epoch(l)) == order(epoch=1), "set_epoch of an epoch already run runs it again"
    l.close()


def test_next_and_stop(server):
    l = make(server, "shm", batch_size=64)
    n = len(l)
    got = [l.next(timeout=10) for _ in range(n)]
    with pytest.raises(StopIteration):
        l.next()
    with pytest.raises(StopIteration):
        l.next()
    assert len(rows_of(got)) == 600
    assert l.state_dict()["consumed"] == n
    l.close()


def test_keys_and_labels(server):
    with make(server, "grpc", batch_size=4, keys=("input_ids", "labels"), labels=True) as l:
        b = next(iter(l))
        assert set(b) == {"input_ids", "labels"}
    with make(server, "grpc", batch_size=4, labels=False, dtype=np.int64) as l:
        b = next(iter(l))
        assert "labels" not in b and b["input_ids"].dtype == np.int64 and b["attention_mask"].dtype == np.int64


def test_report(server):
    with make(server, "shm", batch_size=16) as l:
        for _ in l:
            pass
        text = l.report()
        s = l.stats()
    assert s["steps"] == len(l) and 0 <= s["wait_share"] <= 1 and s["next_p99_s"] >= s["next_p50_s"] > 0
    assert f"steps {s['steps']}" in text and "p99" in text and "GPU" in text


def test_unknown_dataset(server):
    with pytest.raises(gload.DatasetNotFound) as e:
        iter(make(server, "grpc", dataset="nope"))
    assert "nope" in str(e.value) and "other, small" in str(e.value)
    assert isinstance(e.value, LookupError)


def test_unreachable(tmp_path):
    addr = f"unix://{tmp_path}/none.sock"
    l = gload.Loader(addr, "small", return_tensors="np", connect_timeout=0.3)
    with pytest.raises(ConnectionError) as e:
        iter(l)
    assert addr in str(e.value)
    with pytest.raises(ConnectionError):
        l.shapes()


@pytest.mark.parametrize("kw,field", [
    (dict(batch_size=0), "policy.batch_size"),
    (dict(policy="sorted"), "policy.policy"),
    (dict(rank=2, world_size=2), "rank"),
    (dict(policy="packed", batch_size=2), "policy.seq_len"),
    (dict(batch_size=8, boundaries="auto", planner="lazy"), "policy.auto_buckets"),
])
def test_invalid_argument(server, kw, field):
    with pytest.raises(ValueError) as e:
        iter(make(server, "grpc", **kw))
    assert field in str(e.value)


def test_client_side_validation():
    for kw in (dict(transport="udp"), dict(batch_size=-1), dict(boundaries="some"), dict(return_tensors="tf"),
               dict(planner="fast"),
               dict(dtype=np.float32, return_tensors="np")):
        with pytest.raises(ValueError):
            gload.Loader("unix:///x.sock", "d", **{"return_tensors": "np", **kw})
    for addr in ("unix://rel.sock", "host", "dns:///h:1", ""):
        with pytest.raises(ValueError):
            gload.Loader(addr, "d", return_tensors="np")


def test_bad_states(server):
    l = make(server, "grpc", batch_size=8)
    with pytest.raises(ValueError):
        l.load_state_dict({"consumed": 1})
    st = l.state_dict(batches=2)
    with pytest.raises(ValueError):
        make(server, "grpc", batch_size=8, seed=1).load_state_dict(st)
    other = make(server, "grpc", batch_size=9)
    other.load_state_dict(st)
    with pytest.raises(ValueError) as e:
        iter(other)
    assert "policy" in str(e.value)
    l.close()


def test_dataset_changed(server):
    l = make(server, "grpc", batch_size=8)
    st = l.state_dict(batches=1)
    st["fingerprint"] = "0123456789abcdef"
    l.load_state_dict(st)
    with pytest.raises(gload.DatasetChanged):
        iter(l)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_next_timeout(fresh_server, transport):
    fresh_server.start()
    l = make(fresh_server, transport, batch_size=4, prefetch=1)
    it = iter(l)
    next(it)
    batches = len(l)  # asked before the server stops (it is an RPC)
    os.kill(fresh_server.pid, signal.SIGSTOP)
    try:
        # Batches already on their way (prefetch, plus what the socket buffers held when the server stopped) come
        # first; on a loaded machine the server may have run further ahead before SIGSTOP landed. A timeout must come
        # before the epoch runs out.
        with pytest.raises(TimeoutError):
            for _ in range(batches):
                l.next(timeout=0.3)
    finally:
        os.kill(fresh_server.pid, signal.SIGCONT)
    assert l.next(timeout=10) is not None
    rest = list(it)
    assert len(rest) > 0
    l.close()
