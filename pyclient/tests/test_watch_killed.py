"""``gload watch`` after a client is killed with SIGKILL: the client is shown closed, never as a full queue."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from conftest import PYCLIENT, wait_until
from gload.watch import watch_report

CLIENT = r"""
import sys, time
import gload
l = gload.Loader(sys.argv[1], "small", batch_size=4, prefetch=16, transport="grpc", return_tensors="np",
                 client_id="killed-9")
it = iter(l)
for _ in range(3):
    next(it)
print("ready", flush=True)
time.sleep(3600)
"""


def _client(addr):
    for c in watch_report(addr, fmt="dict")["clients"] or []:
        if c["client"] == "killed-9":
            return c
    return None


def test_killed_client_marked_closed(server):
    env = dict(os.environ, GLOAD_NO_TORCH="1", PYTHONPATH=str(PYCLIENT))
    p = subprocess.Popen([sys.executable, "-c", CLIENT, server.addr], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        wait_until(lambda: (_client(server.addr) or {}).get("queue_capacity") == 16, "the client's queue in the watch")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        wait_until(lambda: (_client(server.addr) or {}).get("closed") is True, "the killed client shown closed")
        c = _client(server.addr)
        assert c["queue_depth"] == 0 and c["queue_capacity"] == 0, c
        text = watch_report(server.addr, fmt="text")
        line = [l for l in text.splitlines() if l.startswith("killed-9")]
        assert line and "closed" in line[0] and "16/16" not in line[0], text
    finally:
        if p.poll() is None:
            p.kill()
        p.stdout.close()
