"""Which epoch a new iteration runs (issue 37, item 5): without set_epoch, a loop after one that ran its epoch to the
end runs the next epoch (as Mosaic streaming does); a loop left early starts its epoch again; set_epoch always wins;
a state saved at an epoch's end resumes at the next epoch's start. Numpy path against a real server."""

from __future__ import annotations

import pytest

import gload
from conftest import rows_of


def make(server, **kw) -> gload.Loader:
    kw.setdefault("return_tensors", "np")
    kw.setdefault("keys", ("input_ids", "index"))
    kw.setdefault("batch_size", 16)
    return gload.Loader(server.addr, "small", transport="grpc", **kw)


def order(server, epoch: int):
    with make(server, epoch=epoch) as l:
        return rows_of(list(l))


@pytest.fixture(scope="module")
def orders(server):
    return {e: order(server, e) for e in range(4)}


def test_loops_without_set_epoch_advance(server, orders):
    assert len({tuple(o) for o in orders.values()}) == 4, "every epoch has its own order"
    with make(server) as l:
        for e in range(3):
            assert rows_of(list(l)) == orders[e], f"loop {e} without set_epoch"
            assert l.epoch == e


def test_loop_left_early_restarts_its_epoch(server, orders):
    with make(server) as l:
        it = iter(l)
        first = [next(it) for _ in range(3)]
        assert rows_of(first) == orders[0][:len(rows_of(first))]
        assert rows_of(list(l)) == orders[0], "a loop left early: the next one starts that epoch again"
        assert rows_of(list(l)) == orders[1]


def test_set_epoch_wins(server, orders):
    with make(server) as l:
        assert rows_of(list(l)) == orders[0]
        l.set_epoch(0)
        assert rows_of(list(l)) == orders[0], "set_epoch of the finished epoch runs it again"
        l.set_epoch(3)
        assert rows_of(list(l)) == orders[3]
        l.set_epoch(1)
        l.set_epoch(1)
        assert rows_of(list(l)) == orders[1]


def test_state_at_epoch_end_resumes_next_epoch(server, orders):
    with make(server) as l:
        assert rows_of(list(l)) == orders[0]
        end = l.state_dict()
    with make(server) as l2:
        l2.load_state_dict(end)
        assert rows_of(list(l2)) == orders[1], "a state saved after the epoch's last batch resumes at the next epoch"
        assert l2.epoch == 1
    with make(server) as l3:
        l3.load_state_dict(end)
        l3.set_epoch(0)  # the script's own epoch count says epoch 0 is not over: it gets what is left of it
        assert rows_of(list(l3)) == []
        assert rows_of(list(l3)) == orders[1]


def test_state_mid_epoch_then_next_epochs(server, orders):
    with make(server) as l:
        it = iter(l)
        got = rows_of([next(it) for _ in range(4)])
        st = l.state_dict()
    with make(server) as l2:
        l2.load_state_dict(st)
        assert got + rows_of(list(l2)) == orders[0]
        assert rows_of(list(l2)) == orders[1], "after the resumed epoch's end, the next loop runs the next epoch"


def test_torch_dataloader_epochs_advance(server, orders):
    """A plain torch DataLoader(loader, batch_size=None) (no workers) iterated once per epoch, no set_epoch."""
    torch = pytest.importorskip("torch")
    if not gload.loader.torch:
        pytest.skip("GLOAD_NO_TORCH is set")
    with make(server, return_tensors="pt") as l:
        dl = torch.utils.data.DataLoader(l, batch_size=None)
        for e in range(3):
            assert rows_of(list(dl)) == orders[e], f"DataLoader loop {e}"
