"""The shm doorbell hand-off (issue 14): batches announced in the ring, slots returned through it, no message per
batch. Same batches, same states as the message hand-off and gRPC; cuda keeps the message hand-off."""

from __future__ import annotations

import numpy as np
import pytest

import gload
from conftest import rows_of


def make(server, transport, **kw):
    kw.setdefault("connect_timeout", 5.0)
    kw.setdefault("keys", "all")
    kw.setdefault("return_tensors", "np")
    return gload.Loader(server.addr, kw.pop("dataset", "small"), transport=transport, batch_size=4, **kw)


def batches(loader, n=None):
    out = []
    it = iter(loader)
    for b in it:
        out.append({k: np.array(v) for k, v in b.items()})
        if n is not None and len(out) == n:
            break
    return out


@pytest.mark.parametrize("policy", ["bucketed", "packed"])
def test_doorbell_same_batches_as_messages_and_grpc(server, monkeypatch, policy):
    kw = {"policy": policy, "seq_len": 256} if policy == "packed" else {"policy": policy}
    with make(server, "shm", **kw) as l:
        bell = batches(l)
    monkeypatch.setattr(gload.loader, "_SHM_DOORBELL", False)
    with make(server, "shm", **kw) as l:
        msgs = batches(l)
    with make(server, "grpc", **kw) as l:
        grpc_ = batches(l)
    assert len(bell) == len(msgs) == len(grpc_) > 0
    for a, b, c in zip(bell, msgs, grpc_):
        assert a.keys() == b.keys() == c.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
            np.testing.assert_array_equal(a[k], c[k], err_msg=k)


def test_doorbell_is_used_and_state_matches(server):
    """Over shm with numpy the stream is a doorbell stream (ring with a control region), and state_dict after k
    batches resumes exactly as over gRPC."""
    with make(server, "shm") as l:
        it = iter(l)
        first = [next(it) for _ in range(5)]
        assert l._stream.doorbell and l._stream.ring.headers is not None
        state = l.state_dict()
    with make(server, "grpc") as g:
        git = iter(g)
        gfirst = [next(git) for _ in range(5)]
        assert g.state_dict() == state
        grest = list(git)
    assert rows_of(first) == rows_of(gfirst)
    with make(server, "shm") as r:
        r.load_state_dict(state)
        assert rows_of(r) == rows_of(grest)


def test_doorbell_timeout_and_close_mid_epoch(server):
    """A doorbell stream closed mid-epoch and reopened from its state loses and repeats nothing; next(timeout=)
    still works."""
    with make(server, "shm") as whole:
        want = rows_of(whole)
    l = make(server, "shm")
    it = iter(l)
    got = rows_of([next(it) for _ in range(3)])
    st = l.state_dict()
    l.close()
    l2 = make(server, "shm")
    l2.load_state_dict(st)
    got += rows_of([l2.next(timeout=10.0) for _ in range(2)])
    while True:  # (a new for loop would start the epoch again)
        try:
            got += rows_of([l2.next(timeout=10.0)])
        except StopIteration:
            break
    assert got == want
    l2.close()
