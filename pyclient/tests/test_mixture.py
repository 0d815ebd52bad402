"""Mixtures of datasets through the real server (gload serve --mixture) and the Python client."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import gload
from conftest import Server, _short_tmp, tokenize, write_corpus

WEIGHTS = {"small": 0.6, "other": 0.3, "tiny": 0.1}


@pytest.fixture(scope="module")
def mix_server(gload_bin: str, datasets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("mix")
    write_corpus(root / "tiny.jsonl.gz", 6, seed=3, lo=200, hi=300)  # 100× fewer rows than small, longer
    tiny = tokenize(gload_bin, root / "tiny.jsonl.gz", root / "tiny")
    d = _short_tmp("gload-mix-")
    s = Server(gload_bin, d / "s.sock", {"small": datasets.small, "other": datasets.other, "tiny": tiny},
               d / "serve.log", "--mixture", "pretrain=small:0.6,other:0.3,tiny:0.1").start()
    yield s
    s.stop()
    shutil.rmtree(d, ignore_errors=True)


def _epoch(addr: str, dataset, **kw):
    kw.setdefault("return_tensors", "np")
    kw.setdefault("transport", "grpc")
    with gload.Loader(addr, dataset, batch_size=8, seed=3, keys=("input_ids", "index", "source", "lengths"), **kw) as ld:
        return list(ld), ld


@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_mixture_shares_and_sources(mix_server: Server, datasets, transport: str) -> None:
    batches, ld = _epoch(mix_server.addr, "pretrain", transport=transport)
    src = np.concatenate([b["source"] for b in batches])
    idx = np.concatenate([b["index"] for b in batches])
    total = 600 + 500 + 6
    assert len(src) == total  # one rank: the last, partial batch is kept
    for s, (name, w) in enumerate(WEIGHTS.items()):
        share = float(np.mean(src == s))
        assert abs(share - w) < 2 / len(src) + 8 / len(src), (name, share)
        rows = {"small": 600, "other": 500, "tiny": 6}[name]
        assert idx[src == s].max() < rows
    # tiny (6 rows, 110 slots) is upsampled: each row 18 or 19 times
    counts = np.bincount(idx[src == 2], minlength=6)
    assert set(counts.tolist()) <= {18, 19}, counts
    # small gets 0.6 × 1106 = 664 slots of 600 rows: one pass and 64 rows of the next, no row more than twice
    assert np.bincount(idx[src == 0]).max() <= 2
    rep = ld.report(gpu=False)
    for name in WEIGHTS:
        assert f"source {name}:" in rep
    sc = ld.source_counts()
    assert sum(v["rows"] for v in sc.values()) == len(src)
    assert sc["tiny"]["tokens"] > 0


def test_mixture_from_client_weights(mix_server: Server) -> None:
    a, _ = _epoch(mix_server.addr, "pretrain")
    b, _ = _epoch(mix_server.addr, dict(WEIGHTS))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x["input_ids"], y["input_ids"])
        np.testing.assert_array_equal(x["source"], y["source"])


@pytest.mark.parametrize("policy", ["bucketed", "packed"])
def test_mixture_state_resume(mix_server: Server, policy: str) -> None:
    kw = dict(policy=policy, seq_len=256 if policy == "packed" else 0, pad_multiple=64, rank=0, world_size=2)
    full, _ = _epoch(mix_server.addr, "pretrain", **kw)
    with gload.Loader(mix_server.addr, "pretrain", batch_size=8, seed=3, return_tensors="np", transport="grpc",
                      keys=("input_ids", "index", "source"), **kw) as ld:
        head = [ld.next() for _ in range(4)]
        state = ld.state_dict()
    with gload.Loader(mix_server.addr, "pretrain", batch_size=8, seed=3, return_tensors="np", transport="grpc",
                      keys=("input_ids", "index", "source"), **kw) as ld:
        ld.load_state_dict(state)
        tail = list(ld)
    got = head + tail
    assert len(got) == len(full)
    for x, y in zip(got, full):
        np.testing.assert_array_equal(x["input_ids"], y["input_ids"])
        np.testing.assert_array_equal(x["source"], y["source"])


def test_mixture_tokens(mix_server: Server) -> None:
    batches, ld = _epoch(mix_server.addr, dict(WEIGHTS), mix_by="tokens")
    sc = ld.source_counts()
    tokens = sum(v["tokens"] for v in sc.values())
    for name, w in WEIGHTS.items():
        assert abs(sc[name]["tokens"] / tokens - w) < 0.02, (name, sc)


def test_mixture_refused(mix_server: Server) -> None:
    with pytest.raises(gload.errors.GloadError, match='dataset "chat" is not served here'):
        _epoch(mix_server.addr, {"small": 0.5, "chat": 0.5})
    with pytest.raises(ValueError, match="mixture weight of 'small' is -1"):
        gload.Loader(mix_server.addr, {"small": -1})
    with pytest.raises(gload.errors.GloadError, match="weights sum to 0"):
        _epoch(mix_server.addr, {"small": 0, "other": 0})


def test_mixture_single_source_batches(mix_server: Server) -> None:
    batches, _ = _epoch(mix_server.addr, dict(WEIGHTS), single_source_batches=True)
    assert all(len(set(b["source"].tolist())) == 1 for b in batches)
    assert {int(b["source"][0]) for b in batches} == {0, 1, 2}
