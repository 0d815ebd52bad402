"""torchdata's StatefulDataLoader over a Loader (issue 15): exact resume with the same num_workers through torchdata
itself, and with another num_workers through gload.torchdata.loader_state; len() after the resume is what is left.
torchdata 0.11 runs here on torch 1.13 (.venv-oldest installs it without its torch>=2 requirement)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("GLOAD_NO_TORCH"):
    pytest.skip("GLOAD_NO_TORCH is set", allow_module_level=True)
try:
    from torchdata.stateful_dataloader import StatefulDataLoader
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("torchdata not importable", allow_module_level=True)

import gload  # noqa: E402
from conftest import WORKERS_CONTEXT, rows_of, PATIENCE  # noqa: E402
from gload.torchdata import loader_state  # noqa: E402


def sdl(loader, workers):
    # timeout: a forked worker whose gRPC connection never comes up (seen under heavy load) fails instead of hanging
    return StatefulDataLoader(loader, batch_size=None, num_workers=workers, timeout=120 if workers else 0,
                              multiprocessing_context=WORKERS_CONTEXT if workers else None)


def make(server):
    return gload.Loader(server.addr, "small", batch_size=8, transport="grpc", keys="all", connect_timeout=PATIENCE)


@pytest.mark.parametrize("before, after", [(2, 2), (2, 3), (3, 1), (2, 0)])
def test_resume_with_other_worker_counts(server, datasets, before, after):
    full = rows_of(list(sdl(make(server), before)))
    assert sorted(full) == list(range(datasets.rows["small"]))
    dl = sdl(make(server), before)
    it = iter(dl)
    head = [next(it) for _ in range(11)]
    saved = dl.state_dict()
    del it, dl
    l2 = make(server)
    if before == after:
        dl2 = sdl(l2, after)
        dl2.load_state_dict(saved)  # torchdata's own path
        assert len(dl2) == l2.epoch_batches() - 11, "len after torchdata's load_state_dict: what is left"
    else:
        l2.load_state_dict(loader_state(saved))
        dl2 = sdl(l2, after)
        assert len(dl2) == len(l2) == l2.epoch_batches() - 11  # what is left
    tail = list(dl2)
    assert rows_of(head) + rows_of(tail) == full, "the resumed run goes on exactly where the first stopped"


def test_loader_state_errors():
    with pytest.raises(ValueError, match="no gload Loader state"):
        loader_state({"_snapshot": {}})
    a = {"fingerprint": "a", "seed": 0, "epoch": 0, "policy_hash": "p", "consumed": 3, "plan_world": 1}
    with pytest.raises(ValueError, match="different datasets"):
        loader_state([a, dict(a, fingerprint="b")])
    assert loader_state([a, dict(a, consumed=5), dict(a, consumed=9, epoch=0)])["consumed"] == 9
    assert loader_state([dict(a, consumed=90), dict(a, epoch=1, consumed=1)])["epoch"] == 1
