"""examples/train_torchtitan_style.py (issue 15): the hand-written torch.distributed loop with 2 CPU ranks (gloo),
started with the environment torchrun gives them (as test_ddp.py does), against a real gload serve. A run stopped at
step 10 with a checkpoint from rank 0 (model, optimizer, loader state) is resumed from it to the end of the epoch: in
each run both ranks train the same number of steps, and across the two runs every dataset row comes exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from conftest import HAVE_TORCH, PYCLIENT
from test_ddp import free_port

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")

EXAMPLE = PYCLIENT / "examples" / "train_torchtitan_style.py"


def launch(nproc, *args, timeout=600):
    port = str(free_port())
    procs = []
    for rank in range(nproc):
        env = dict(os.environ, OMP_NUM_THREADS="1", RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                   LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, CUDA_VISIBLE_DEVICES="")
        procs.append(subprocess.Popen([sys.executable, str(EXAMPLE), *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError("a rank hung (unequal step counts hang the collectives)")
    for rank, p in enumerate(procs):
        assert p.returncode == 0, f"rank {rank} failed ({p.returncode}):\n{logs[rank][-4000:]}"
    return logs


# A training script run as a subprocess (twice, to resume): minutes of CPU torch on a loaded 2-core machine, more than
# the suite's 300 s per test.
@pytest.mark.timeout(1200)
def test_titan_style_epoch_and_resume(server, datasets, tmp_path):
    common = ["--addr", server.addr, "--dataset", "small", "--batch-size", "12"]
    ckpt = tmp_path / "titan.pt"
    logs = launch(2, *common, "--steps", "10", "--ckpt", str(ckpt), "--save-every", "5",
                  "--rows-out", str(tmp_path / "a.json"))
    assert "step 10 loss" in logs[0]
    import torch

    ck = torch.load(ckpt)
    assert ck["step"] == 10 and ck["loader"]["consumed"] == 20, ck["loader"]  # 10 steps x 2 ranks
    launch(2, *common, "--epochs", "1", "--ckpt", str(ckpt), "--rows-out", str(tmp_path / "b.json"))
    a, b = json.loads((tmp_path / "a.json").read_text()), json.loads((tmp_path / "b.json").read_text())
    assert [r["steps"] for r in a] == [10, 10]
    assert len({r["steps"] for r in b}) == 1, [r["steps"] for r in b]
    assert b[0]["steps"] == 600 // 12 // 2 - 10, "the resumed run must train exactly what was left of the epoch"
    counts = Counter(i for r in a + b for i in r["rows"])
    assert max(counts.values()) == 1, "a row came twice across the resume"
    assert len(counts) == datasets.rows["small"], f"{len(counts)} rows of {datasets.rows['small']}"
