"""``next(timeout=)`` and the Loader's times: infinity waits without bound, NaN and negative times are refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gload


def _loader(server, **kw):
    return gload.Loader(server.addr, "small", batch_size=16, transport="grpc", return_tensors="np", **kw)


def test_next_timeout_inf_waits_without_bound(server):
    with _loader(server) as loader:
        b = loader.next(timeout=math.inf)  # raised OverflowError before
        assert b["input_ids"].shape[0] > 0
        b = loader.next(timeout=np.float64("inf"))
        assert b["input_ids"].shape[0] > 0
        assert loader.next(timeout=1e300)["input_ids"].shape[0] > 0  # beyond what a lock can wait: no bound either


@pytest.mark.parametrize("bad", [math.nan, -1, -0.5, "1", True])
def test_next_timeout_refused(server, bad):
    with _loader(server) as loader:
        with pytest.raises(ValueError, match="timeout"):  # NaN timed out at once before
            loader.next(timeout=bad)


@pytest.mark.parametrize("kw", [dict(timeout=math.nan), dict(timeout=-1), dict(connect_timeout=math.nan),
                                dict(reconnect_timeout=-2), dict(connect_timeout=None)])
def test_loader_times_refused(kw):
    with pytest.raises(ValueError):
        gload.Loader("unix:///nonexistent.sock", "small", return_tensors="np", **kw)


def test_loader_timeout_inf(server):
    with _loader(server, timeout=math.inf, connect_timeout=math.inf) as loader:
        assert loader.timeout is None
        assert sum(len(b["input_ids"]) for b in loader) == 600
        assert loader.datasets()  # an infinite connect_timeout is no gRPC deadline
