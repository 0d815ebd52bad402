"""DDP on CPU (gloo): 2-4 ranks started as torchrun would, each with its own gload.Loader, against a real gload serve.

Proves, with real collective ops: every row exactly once per epoch across ranks, equal step counts (DDP would hang
otherwise), and elastic resume (stop at step k with 4 ranks, resume with 2: nothing lost, nothing repeated).
"""
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import HAVE_TORCH

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")

WORKER = Path(__file__).with_name("ddp_worker.py")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torchrun(nproc: int, *args: str, timeout: float = 90) -> dict:
    """Starts nproc ranks with the environment torchrun gives them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
    MASTER_PORT). torchrun itself is not used here: Debian's torch 1.13 launcher breaks on Python 3.11 (its Std
    IntFlag parsing), while the ranks only need the environment. The GPU-machine run uses the real torchrun."""
    out = Path(args[2])
    port = str(free_port())
    procs = []
    for rank in range(nproc):
        env = dict(os.environ, OMP_NUM_THREADS="1", RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                   LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, str(WORKER), *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            tails = [(q.communicate()[0] or "")[-1500:] for q in procs]
            raise AssertionError("a rank hung (unequal batch counts hang DDP's collective ops):\n" + "\n---\n".join(tails))
    for rank, p in enumerate(procs):
        assert p.returncode == 0, f"rank {rank} failed ({p.returncode}):\n{logs[rank][:6000]}"
    return json.loads(out.read_text())


@pytest.mark.parametrize("transport", ["shm", "grpc"])
def test_ddp_epoch_exactly_once(server, datasets, tmp_path, transport):
    res = torchrun(2, server.addr, "small", str(tmp_path / "out.json"), transport)
    ranks = res["ranks"]
    assert len({r["steps"] for r in ranks}) == 1, [r["steps"] for r in ranks]
    rows = [i for r in ranks for i in r["rows"]]
    counts = Counter(rows)
    assert max(counts.values()) == 1, "a row came twice"
    assert len(counts) == datasets.rows["small"], f"{len(counts)} rows of {datasets.rows['small']}"


def test_ddp_elastic_resume(server, datasets, tmp_path):
    first = torchrun(4, server.addr, "small", str(tmp_path / "a.json"), "shm", "--stop-after", "7")
    ranks = first["ranks"]
    assert all(r["steps"] == 7 for r in ranks)
    states = [json.dumps(r["state"], sort_keys=True) for r in ranks]
    assert len(set(states)) == 1, "ranks disagree on the global resume state"
    state_file = tmp_path / "state.json"
    state_file.write_text(states[0])
    second = torchrun(2, server.addr, "small", str(tmp_path / "b.json"), "shm", "--resume", str(state_file))
    assert len({r["steps"] for r in second["ranks"]}) == 1
    before = [i for r in ranks for i in r["rows"]]
    after = [i for r in second["ranks"] for i in r["rows"]]
    counts = Counter(before + after)
    assert max(counts.values()) == 1, "a row came twice across the resume"
    # 600 rows in batches of 4: the plan's batches divide evenly among 2 ranks after 28 consumed, so nothing drops.
    missing = datasets.rows["small"] - len(counts)
    assert missing <= 4 * 1, f"{missing} rows missing after elastic resume"


@pytest.mark.timeout(1500)
def test_job_of_8_ranks_x_4_workers_over_a_path(datasets, tmp_path, monkeypatch):
    """What `torchrun --nproc-per-node 8` of a script with Loader(path) and DataLoader(num_workers=4) does: every rank
    and worker of the job shares one auto-started server (one address), every row comes at most once per epoch
    (only the remainder that does not divide among 8 ranks is dropped), and a stop at step 3 resumed on the same
    layout loses and repeats nothing. 40 processes on the 2-core machine: minutes, not seconds."""
    monkeypatch.setenv("GLOAD_JOB", f"ddp8x4-{os.getpid()}")  # a job of its own: its own server
    monkeypatch.setenv("GLOAD_DDP_DUMP_AFTER", "900")
    args = ("-", str(datasets.small))
    first = torchrun(8, args[0], args[1], str(tmp_path / "a.json"), "shm", "--workers", "4", "--stop-after", "3",
                     timeout=900)
    ranks = first["ranks"]
    assert len({r["addr"] for r in ranks}) == 1, "the ranks attached to different servers"
    assert all(r["steps"] == 3 for r in ranks)
    states = {json.dumps(r["state"], sort_keys=True) for r in ranks}
    assert len(states) == 1, "ranks disagree on the global resume state"
    state_file = tmp_path / "state.json"
    state_file.write_text(states.pop())
    second = torchrun(8, args[0], args[1], str(tmp_path / "b.json"), "shm", "--workers", "4", "--resume",
                      str(state_file), timeout=900)
    assert len({r["steps"] for r in second["ranks"]}) == 1, "unequal step counts after the resume"
    rows = [i for r in ranks for i in r["rows"]] + [i for r in second["ranks"] for i in r["rows"]]
    counts = Counter(rows)
    assert max(counts.values()) == 1, "a row came twice across the resume"
    dropped = datasets.rows["small"] - len(counts)
    assert 0 <= dropped < 8 * 4, f"{dropped} rows missing: more than the remainder of 8 ranks' batches of 4"
