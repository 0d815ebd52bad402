"""Processes dying: a client killed with SIGKILL mid-epoch (the server frees its ring), and a server killed with
SIGKILL (the client reports it or reconnects, and resumes against a restarted server with nothing lost)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import pytest

import gload
from conftest import PYCLIENT, TRANSPORTS, rings_of, rows_of, wait_until

# A zygote that imports gload once and forks one client per line it reads; each client opens a shm stream, takes
# one batch, reports "pid ring-path" and then holds its slots until it is killed.
ZYGOTE = r"""
import os, signal, sys, time
import gload
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
for line in sys.stdin:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            l = gload.Loader(sys.argv[1], "small", batch_size=4, prefetch=4, transport="shm", return_tensors="np", keys="all")
            next(iter(l))
            os.write(w, l._stream.ring.path.encode())
        finally:
            os.close(w)
        while True:
            time.sleep(3600)
    os.close(w)
    path = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        path += chunk
    os.close(r)
    print(pid, path.decode(), flush=True)
"""

CYCLES = int(os.environ.get("GLOAD_KILL_CYCLES", "100"))
PARALLEL = 4


def test_client_killed_frees_ring(server):
    """SIGKILL a client that holds slots of its ring mid-epoch, CYCLES times: each time the server ends the stream
    and unlinks the ring, and /dev/shm keeps no ring of the server's."""
    env = dict(os.environ, GLOAD_NO_TORCH="1", PYTHONPATH=str(PYCLIENT))
    zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE, server.addr], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env, text=True)
    try:
        done = 0
        while done < CYCLES:
            n = min(PARALLEL, CYCLES - done)
            zygote.stdin.write("go\n" * n)
            zygote.stdin.flush()
            kids = []
            for _ in range(n):
                line = zygote.stdout.readline().split()
                assert len(line) == 2 and line[1].startswith("/dev/shm/gload-"), f"client said {line!r}"
                kids.append((int(line[0]), line[1]))
            for pid, path in kids:
                assert os.path.exists(path)
                os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not any(os.path.exists(p) for _, p in kids), "rings of killed clients removed")
            done += n
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=10)
        zygote.stdout.close()
    wait_until(lambda: rings_of(server.pid) == [], "no ring of the server left in /dev/shm")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_killed_reconnects(fresh_server, datasets, transport):
    """The server dies mid-epoch and comes back: the client reconnects and the epoch completes exactly once."""
    fresh_server.start()
    l = gload.Loader(fresh_server.addr, "small", batch_size=4, prefetch=4, transport=transport,
                     return_tensors="np", reconnect_timeout=30, keys="all")
    it = iter(l)
    got = [next(it) for _ in range(20)]
    old = fresh_server.pid
    fresh_server.kill()
    if transport == "shm":
        assert rings_of(old), "a killed server leaves its ring behind"
    fresh_server.start()
    got += list(it)
    assert sorted(rows_of(got)) == list(range(datasets.rows["small"]))
    assert l.stats()["reconnects"] == 1
    assert rings_of(old) == [], "the restarted server removed the dead server's ring"
    l.close()
    wait_until(lambda: rings_of(fresh_server.pid) == [], "ring removed at the end")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_killed_reported(fresh_server, datasets, transport):
    """Without reconnection the client raises ServerUnavailable; its state resumes on a restarted server."""
    fresh_server.start()
    l = gload.Loader(fresh_server.addr, "small", batch_size=4, prefetch=2, transport=transport,
                     return_tensors="np", reconnect_timeout=0, keys="all")
    it = iter(l)
    got = [next(it) for _ in range(10)]
    fresh_server.kill()
    with pytest.raises(gload.ServerUnavailable) as e:
        while True:  # the batches already received come first
            got.append(l.next(timeout=10))
    assert fresh_server.addr in str(e.value)
    state = l.state_dict()
    assert state["consumed"] == len(got)
    l.close()
    fresh_server.start()
    l2 = gload.Loader(fresh_server.addr, "small", batch_size=4, transport=transport, return_tensors="np", keys="all")
    l2.load_state_dict(state)
    got += list(l2)
    assert sorted(rows_of(got)) == list(range(datasets.rows["small"]))
    l2.close()


def test_server_restarted_with_other_data(fresh_server, datasets):
    """The server comes back serving other data under the same name: a clear DatasetChanged, not a silent mix."""
    fresh_server.start()
    l = gload.Loader(fresh_server.addr, "small", batch_size=4, transport="grpc", return_tensors="np",
                     reconnect_timeout=30)
    it = iter(l)
    next(it)
    fresh_server.kill()
    fresh_server.start({"small": datasets.other})
    with pytest.raises(gload.DatasetChanged) as e:
        for _ in it:
            pass
    assert "fingerprint" in str(e.value)
    l.close()
