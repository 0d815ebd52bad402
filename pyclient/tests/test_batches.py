"""What a batch holds (issue 15): default keys a causal LM's forward takes, unknown keys refused, per-key dtypes with
transformers' defaults, shifted labels, the dataset's pad token, evaluation passes, len() after a resume, and the
error a batching DataLoader gets. numpy path (runs without torch) unless marked."""

from __future__ import annotations

import os

import numpy as np
import pytest

import gload
from conftest import HAVE_TORCH, rows_of, PATIENCE


def make(server, **kw) -> gload.Loader:
    kw.setdefault("return_tensors", "np")
    kw.setdefault("connect_timeout", PATIENCE)
    return gload.Loader(server.addr, kw.pop("dataset", "small"), transport=kw.pop("transport", "grpc"), **kw)


def test_default_keys(server):
    with make(server, batch_size=4) as l:
        b = next(iter(l))
    assert list(b) == ["input_ids", "attention_mask", "labels"]  # model(**batch) takes exactly these
    assert all(v.dtype == np.int64 for v in b.values())  # cross_entropy wants int64 targets
    with make(server, batch_size=2, policy="packed", seq_len=128) as l:
        assert list(next(iter(l))) == ["input_ids", "attention_mask", "labels", "position_ids"]
    with make(server, batch_size=4, labels=False) as l:
        assert list(next(iter(l))) == ["input_ids", "attention_mask"]
    with make(server, batch_size=4, keys=["input_ids", "index"]) as l:
        b = next(iter(l))
    assert list(b) == ["input_ids", "index"] and b["index"].dtype == np.int64


@pytest.mark.parametrize("keys, msg", [
    (["input_ids", "idx"], "unknown key 'idx'; valid keys: input_ids, attention_mask, labels, position_ids"),
    (["position_ids"], "'position_ids' exists only for policy='packed'"),
    ("input_ids", "want a list of key names or 'all'"),
    (["input_ids", "input_ids"], "names a key twice"),
])
def test_unknown_keys_refused(keys, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        gload.Loader("unix:///nowhere.sock", "small", keys=keys, return_tensors="np")


def test_dtypes(server):
    with make(server, batch_size=4, dtype={"input_ids": np.int32}) as l:
        b = next(iter(l))
    assert b["input_ids"].dtype == np.int32 and b["labels"].dtype == np.int64 and b["attention_mask"].dtype == np.int64
    with make(server, batch_size=4, dtype=np.int32) as l:
        b = next(iter(l))
    assert {v.dtype for v in b.values()} == {np.dtype(np.int32)}
    with pytest.raises(ValueError, match=r"dtype: unknown key 'lengths' \(lengths is always int32\)"):
        make(server, dtype={"lengths": np.int64})
    with pytest.raises(ValueError, match=r"dtype\['labels'\] <class 'numpy.float32'>: want numpy.int32 or numpy.int64"):
        make(server, dtype={"labels": np.float32})


@pytest.mark.parametrize("policy", ["bucketed", "packed"])
def test_shifted_labels(server, policy):
    kw = dict(batch_size=4) if policy == "bucketed" else dict(batch_size=2, policy="packed", seq_len=256,
                                                             position_start=0)
    with make(server, keys="all", **kw) as plain, make(server, keys="all", labels="shifted", ignore_index=-1,
                                                        **kw) as shifted:
        for a, b in zip(plain, shifted):
            assert (a["input_ids"] == b["input_ids"]).all()
            want = np.full_like(a["labels"], -1)
            want[:, :-1] = np.where(a["labels"][:, 1:] == -100, -1, a["labels"][:, 1:])
            assert (b["labels"] == want).all()
            # Next-token targets: wherever both tokens are real (and, packed, in the same document).
            ids, tgt = b["input_ids"], b["labels"]
            real = tgt != -1
            assert (tgt[:, :-1][real[:, :-1]] == ids[:, 1:][real[:, :-1]]).all()
            if policy == "packed":
                starts = b["position_ids"] == 0
                assert (tgt[:, :-1][starts[:, 1:]] == -1).all(), "a target crossed into the next document"
            else:
                lengths = b["lengths"]
                for r, n in enumerate(lengths):
                    assert (tgt[r, : n - 1] == ids[r, 1:n]).all() and (tgt[r, n - 1:] == -1).all()
    with pytest.raises(ValueError, match="labels 'next'"):
        make(server, labels="next")


def test_pad_from_dataset_and_override(server):
    with make(server, batch_size=8, keys="all") as l:
        pad = {d["name"]: d for d in l.datasets()}["small"]["pad_id"]
        assert pad > 0  # the tokenizer's <|pad|>, recorded by gload tokenize
        b = next(iter(l))
        mask = b["attention_mask"].astype(bool)
        assert (~mask).any() and (b["input_ids"][~mask] == pad).all()
    with make(server, batch_size=8, pad_id=0) as l:
        b = next(iter(l))
        assert (b["input_ids"][~b["attention_mask"].astype(bool)] == 0).all()


@pytest.mark.parametrize("world", [1, 3])
def test_eval_pass(server, datasets, world):
    """eval=True: dataset order, the last partial batch kept, every row once over uneven ranks."""
    per_rank = []
    for rank in range(world):
        with make(server, batch_size=7, eval=True, keys="all", rank=rank, world_size=world) as l:
            bs = list(l)
            assert len(bs) == len(l)
            per_rank.append(bs)
    order = []
    for k in range(max(len(p) for p in per_rank)):
        for r in range(world):
            if k < len(per_rank[r]):
                order += rows_of([per_rank[r][k]])
    assert order == list(range(datasets.rows["small"]))  # dataset order, each row once
    batches = -(-datasets.rows["small"] // 7)  # 86, the last one of 5 rows
    assert sum(len(p) for p in per_rank) == batches
    last = per_rank[(batches - 1) % world][-1]
    assert len(last["input_ids"]) == datasets.rows["small"] % 7, "the last partial batch is kept"
    if world == 3:
        assert [len(p) for p in per_rank] == [29, 29, 28]
    # shuffle=False, remainder="keep" is the same pass.
    with make(server, batch_size=7, shuffle=False, remainder="keep", keys="all") as l:
        assert rows_of(list(l)) == list(range(datasets.rows["small"]))
    with pytest.raises(ValueError, match="contradicts"):
        make(server, eval=True, remainder="drop")


def test_len_and_progress_after_resume(server):
    with make(server, batch_size=8) as l:
        n = len(l)
        it = iter(l)
        for _ in range(5):
            next(it)
        assert l.progress()["done"] == 5 and l.progress()["left"] == n - 5 and l.progress()["eta_s"] is not None
        state = l.state_dict()
    with make(server, batch_size=8) as l2:
        l2.load_state_dict(state)
        assert len(l2) == n - 5 and l2.epoch_batches() == n
        p = l2.progress()
        assert (p["batches"], p["done"], p["left"], p["eta_s"]) == (n, 5, n - 5, None)
        assert len(list(l2)) == n - 5


@pytest.mark.skipif(not HAVE_TORCH, reason="torch not importable")
def test_batching_dataloader_refused(server):
    import torch.utils.data

    l = make(server, batch_size=4, return_tensors="pt")
    for bs in (1, 8):  # DataLoader's default, and what the HF Trainer passes
        with pytest.raises(gload.InvalidArgument, match=r"DataLoader\(loader, batch_size=None\).*gload.hf.GloadTrainer"):
            next(iter(torch.utils.data.DataLoader(l, batch_size=bs)))
    b = next(iter(torch.utils.data.DataLoader(l, batch_size=None)))
    assert b["input_ids"].dim() == 2
    l.close()
