"""A Loader dropped without close() gives its stream, ring and connection back (issue 34 item 13)."""

from __future__ import annotations

import gc
import os
import weakref

import gload
from conftest import rings_of, wait_until


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_dropped_loaders_release_server_resources(fresh_server):
    srv = fresh_server.start()
    # One loader first, closed, so that lazily made server state (plans, pools) is in the baseline.
    with gload.Loader(srv.addr, "small", batch_size=4, return_tensors="np") as warm:
        next(iter(warm))
    gc.collect()
    wait_until(lambda: not rings_of(srv.pid), "the closed loader's ring removed")
    base_fds = _fds(srv.pid)
    refs = []
    for _ in range(50):
        loader = gload.Loader(srv.addr, "small", batch_size=4, return_tensors="np")
        next(iter(loader))  # a stream and a ring on the server
        refs.append(weakref.ref(loader))
        del loader
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of 50 dropped loaders are still referenced"
    wait_until(lambda: not rings_of(srv.pid), "every dropped loader's ring removed", timeout=60)
    wait_until(lambda: _fds(srv.pid) <= base_fds + 2, f"the server's fds back to {base_fds} (+2)", timeout=60)
