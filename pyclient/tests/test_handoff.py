"""The shm doorbell hand-off (issue 14): batches announced in the ring, slots returned through it, no message per
batch. Same batches, same states as the message hand-off and gRPC; cuda keeps the message hand-off."""

from __future__ import annotations

import numpy as np
import pytest

import gload
from conftest import rows_of, PATIENCE


def make(server, transport, **kw):
    kw.setdefault("connect_timeout", PATIENCE)
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


# -- zero_copy: read-only views of the slot, valid until the next next() ------------------------------------------


@pytest.mark.parametrize("policy", ["bucketed", "packed"])
@pytest.mark.parametrize("prefetch", [1, 4])
def test_zero_copy_same_batches_as_copies(server, policy, prefetch):
    """zero_copy=True hands out the same batches (input_ids as int32 views of the ring, read-only) and the same
    state; prefetch=1 proves the held slot goes back before the next batch is waited for (else no batch comes)."""
    kw = {"policy": policy, "seq_len": 256} if policy == "packed" else {"policy": policy}
    with make(server, "shm", prefetch=prefetch, **kw) as l:
        want = batches(l)
    got = []
    with make(server, "shm", prefetch=prefetch, zero_copy=True, **kw) as z:
        for b in z:
            ids = b["input_ids"]
            assert ids.dtype == np.int32 and not ids.flags.writeable and not ids.flags.owndata
            assert np.shares_memory(ids, z._stream.ring._bytes), "input_ids is not a view of the ring"
            assert not b["lengths"].flags.writeable
            with pytest.raises(ValueError):
                ids[0, 0] = 1  # read-only: a write cannot change the slot
            got.append({k: np.array(v) for k, v in b.items()})
    assert len(got) == len(want) > 0
    for a, b in zip(got, want):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
            if k not in ("input_ids", "position_ids"):
                assert a[k].dtype == b[k].dtype, k
        assert a["input_ids"].dtype == np.int32 and b["input_ids"].dtype == np.int64


def test_zero_copy_state_resumes_exactly(server):
    """state_dict after k zero-copy batches resumes where a copying stream would, and a view stays intact until the
    next next() call."""
    with make(server, "shm") as l:
        want = rows_of(l)
    z = make(server, "shm", zero_copy=True)
    it = iter(z)
    got = []
    for _ in range(4):
        b = next(it)
        kept = np.array(b["input_ids"])
        z.state_dict()  # neither this nor time passing touches the held slot
        np.testing.assert_array_equal(b["input_ids"], kept)
        got += rows_of([{k: np.array(v) for k, v in b.items()}])
    st = z.state_dict()
    z.close()
    with make(server, "shm", zero_copy=True) as r:
        r.load_state_dict(st)
        got += rows_of([{k: np.array(v) for k, v in b.items()} for b in r])
    assert got == want


@pytest.mark.parametrize("kw, says", [
    ({"transport": "grpc"}, "transport='shm'"),
    ({"return_tensors": "pt"}, "return_tensors='np'"),
    ({"dtype": np.int64}, "int32"),
    ({"zero_copy": "yes"}, "want True or False"),
])
def test_zero_copy_refuses_what_it_cannot_do(server, kw, says):
    if kw.get("return_tensors") == "pt":
        pytest.importorskip("torch", reason="return_tensors='pt' needs torch")
    kw = {"zero_copy": True, **kw}
    transport = kw.pop("transport", "shm")
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        make(server, transport, **kw)


@pytest.mark.parametrize("policy", ["bucketed", "packed"])
def test_zero_copy_views_only_come_from_kept_views(server, policy):
    """zero_copy with only keys the slot holds (input_ids, lengths, index): after a slot's first batch of a shape
    its views are kept and each later batch there gets fresh view objects of them — the same content as copies,
    and a caller that reshapes its batch's array does not change the next batch's."""
    kw = {"policy": policy, "seq_len": 256} if policy == "packed" else {"policy": policy}
    keys = ["input_ids", "lengths", "index"]
    with make(server, "shm", prefetch=2, keys=keys, **kw) as l:
        want = batches(l)
    got = []
    with make(server, "shm", prefetch=2, keys=keys, zero_copy=True, **kw) as z:
        for b in z:
            assert all(not v.flags.writeable for v in b.values())
            got.append({k: np.array(v) for k, v in b.items()})
            b["input_ids"].shape = (-1,)  # the caller's own view object: the kept one is untouched
        assert z._stream is None or z._stream.converter._view_plans == {}  # (closed at the end)
    assert len(got) == len(want) > 4
    for a, b in zip(got, want):
        for k in keys:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
            assert a[k].shape == b[k].shape, k


def test_zero_copy_keeps_views_per_slot_and_shape(server):
    """The kept views are per (slot, shape), made once: an epoch over prefetch 2 keeps no more of them than slots ×
    shapes, and batches computed per batch (attention_mask) are never kept."""
    with make(server, "shm", prefetch=2, keys=["input_ids", "lengths"], zero_copy=True) as z:
        it = iter(z)
        shapes = set()
        for _ in range(12):
            shapes.add(next(it)["input_ids"].shape)
        plans = z._stream.converter._view_plans
        assert 0 < len(plans) <= z._stream.opened.slots * len(shapes)
    with make(server, "shm", prefetch=2, zero_copy=True) as z:  # default keys: attention_mask is made per batch
        it = iter(z)
        for _ in range(6):
            next(it)
        assert z._stream.converter._view_plans == {}


@pytest.mark.parametrize("transport", ["shm", "grpc"])
@pytest.mark.parametrize("policy", ["bucketed", "packed", "truncated"])
def test_attention_mask_and_labels_follow_lengths(server, transport, policy):
    """attention_mask is 1 exactly on each row's first length tokens and labels are input_ids there and -100
    elsewhere — for padded rows and for rows that all fill the batch (packed and fixed-length batches take a
    shortcut for those)."""
    kw = {"bucketed": {"policy": "bucketed"}, "packed": {"policy": "packed", "seq_len": 256},
          "truncated": {"policy": "bucketed", "max_length": 8, "pad_multiple": 8}}[policy]
    full = 0
    with make(server, transport, labels=True, **kw) as l:
        for b in l:
            ids, mask, lengths = b["input_ids"], b["attention_mask"], b["lengths"]
            want = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(mask.dtype)
            np.testing.assert_array_equal(mask, want)
            assert mask.flags.writeable and mask.dtype == np.int64
            if policy != "packed":
                np.testing.assert_array_equal(b["labels"], np.where(want == 1, ids, -100))
            full += int(lengths.min() == ids.shape[1])
    if policy != "bucketed":
        assert full > 0, "no batch of full rows: the shortcut was not exercised"
