"""gload.doctor on the CPU: phases, steps, hooks, tokens, the profiler window, the evidence file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import PYCLIENT
from gload.doctor import Doctor, _parse_profile, summarize_kernels

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed: gload.doctor's hooks, profiler and CUDA path need it")


def _records(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def _steps(path):
    return [r for r in _records(path) if r["kind"] == "step"]


def test_off_without_path(tmp_path, monkeypatch):
    monkeypatch.delenv("GLOAD_DOCTOR_EVIDENCE", raising=False)
    doc = Doctor()
    assert not doc.enabled
    with doc.step():
        with doc.phase("data"):
            pass
    doc.close()
    assert list(tmp_path.iterdir()) == []


def test_phases_on_host_clock(tmp_path):
    path = tmp_path / "ev.jsonl"
    doc = Doctor(str(path), cuda=False)
    for _ in range(4):
        with doc.step():
            with doc.phase("data"):
                time.sleep(0.02)
            with doc.phase("forward"):
                pass
            time.sleep(0.005)  # unnamed: "other"
            doc.tokens(30, 40)
    doc.close()
    recs = _records(path)
    assert recs[0]["kind"] == "doctor" and recs[0]["cuda"] is False
    steps = _steps(path)
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    for s in steps:
        assert s["phases"]["data"][0] >= 19, s
        assert s["phases"]["data"][1] is None and s["gpu_ms"] is None
        assert s["phases"]["other"][0] >= 4.5, s
        assert s["tokens"] == [30, 40]
        assert abs(sum(v[0] for v in s["phases"].values()) - s["wall_ms"]) < 0.5


@needs_torch
def test_iterate_and_optimizer_hooks(tmp_path):
    path = tmp_path / "ev.jsonl"
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    doc = Doctor(str(path), cuda=False)
    doc.watch(opt)
    doc.watch(model)

    def slow_batches():
        for _ in range(5):
            time.sleep(0.01)
            yield torch.randn(4, 8)

    for x in doc.iterate(slow_batches()):
        mask = torch.ones(4, 8)
        mask[:, 6:] = 0
        doc.tokens(mask)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    doc.close()
    steps = _steps(path)
    assert len(steps) == 5
    for s in steps:
        ph = s["phases"]
        assert set(ph) >= {"data", "forward", "backward", "optimizer"}, ph
        assert ph["data"][0] >= 9
        assert s["tokens"] == [24, 32]


def test_bad_phase_name(tmp_path):
    doc = Doctor(str(tmp_path / "ev.jsonl"), cuda=False)
    with pytest.raises(ValueError, match="not one of"):
        with doc.phase("lunch"):
            pass
    doc.close()


@needs_torch
def test_profile_window_on_cpu(tmp_path):
    path = tmp_path / "ev.jsonl"
    doc = Doctor(str(path), cuda=False, profile=(1, 2))
    for _ in range(4):
        with doc.step():
            torch.randn(16, 16) @ torch.randn(16, 16)
    doc.close()
    prof = [r for r in _records(path) if r["kind"] == "profile"]
    assert len(prof) == 1, _records(path)
    assert prof[0].get("kernels") == 0 and "no CUDA" in prof[0]["note"], prof


def test_profile_env_rejected():
    with pytest.raises(ValueError, match="START:COUNT"):
        _parse_profile("5")
    with pytest.raises(ValueError, match="COUNT"):
        _parse_profile("5:0")
    assert _parse_profile("20:5") == (20, 5)


def test_unwritable_path_warns_and_stops(tmp_path):
    doc = Doctor(str(tmp_path / "missing" / "ev.jsonl"), cuda=False)
    with pytest.warns(RuntimeWarning, match="cannot open"):
        with doc.step():
            pass
    assert not doc.enabled
    doc.close()


def test_summarize_kernels():
    # Three kernels of 10 µs with 5 µs and 20 µs gaps, one NCCL kernel overlapping the last.
    ks = [("gemm", 0, 10), ("add", 15, 25), ("relu", 45, 55), ("ncclDevKernel_AllReduce", 50, 60)]
    s = summarize_kernels(ks, steps=2)
    assert s["kernels"] == 4 and s["kernels_per_step"] == 2
    assert s["span_ms"] == pytest.approx(0.060)
    assert s["busy_ms"] == pytest.approx(0.035)
    assert s["busy_share"] == pytest.approx(35 / 60)
    assert s["mean_gap_us"] == pytest.approx(25 / 4)
    assert s["nccl_share"] == pytest.approx(10 / 35)
    assert summarize_kernels([], 3) == {"steps": 3, "kernels": 0}


def test_ranks_share_a_file(tmp_path):
    path = tmp_path / "ev.jsonl"
    script = (
        "import sys, time\n"
        "from gload.doctor import Doctor\n"
        "d = Doctor(sys.argv[1], rank=int(sys.argv[2]), cuda=False)\n"
        "for _ in range(200):\n"
        "    with d.step():\n"
        "        with d.phase('forward'): pass\n"
        "d.close()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(PYCLIENT), GLOAD_NO_TORCH="1")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), str(r)], env=env) for r in range(3)]
    assert [p.wait(timeout=600) for p in procs] == [0, 0, 0]
    steps = _steps(path)  # every line parses: no torn writes
    for r in range(3):
        assert sorted(s["step"] for s in steps if s["rank"] == r) == list(range(200))


TRAIN = r"""
import sys, time, torch
from gload.doctor import Doctor
w = int(sys.argv[2])
model = torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.ReLU(), torch.nn.Linear(w, 1))
x0 = torch.randn(256, w)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
doc = Doctor()
doc.watch(opt)
doc.watch(model)
def batches():
    for _ in range(30):
        time.sleep(float(sys.argv[1]))  # the input pipeline
        yield x0
for x in doc.iterate(batches()):
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
doc.close()
"""


@needs_torch
@pytest.mark.parametrize("sleep,width,cause", [(0.03, 32, "input pipeline"), (0.0, 768, "unknown")])
def test_gload_doctor_cpu_job(tmp_path, gload_bin, sleep, width, cause):
    """``gload doctor`` on a machine without a GPU: the torch job runs, its phases are read, the cause named from them
    (or, with no idle phase, left unknown: without a GPU nothing tells compute from launch overhead)."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out = tmp_path / "res.json"
    env = dict(os.environ, PYTHONPATH=str(PYCLIENT))
    p = subprocess.run([gload_bin, "doctor", "--json", "--out", str(out), "--report", str(tmp_path / "r.svg"), "--",
                        sys.executable, str(script), str(sleep), str(width)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    res = json.loads(out.read_text())
    d = res["diagnosis"]
    assert d["cause"] == cause, p.stdout
    assert d["phases"]["steps"] == 25 and d["phases"]["basis"] == "host time", d
    assert set(d["phases"]["shares"]) >= {"data", "forward", "backward", "optimizer"}, d
    if res["run"].get("no_gpu"):
        assert "no GPU visible" in p.stdout and d["evidence"] == "phases"
    assert (tmp_path / "r.svg").read_text().startswith("<svg")


class _FakeEvent:
    """Stands in for torch.cuda.Event on a machine without CUDA: 'GPU' time is the host time of record(), and the
    'GPU' has passed an event once the test says so."""

    passed_until = 0.0
    created = 0

    def __init__(self, enable_timing=False):
        assert enable_timing
        _FakeEvent.created += 1
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def query(self):
        return self.t is not None and self.t <= _FakeEvent.passed_until

    def synchronize(self):
        _FakeEvent.passed_until = max(_FakeEvent.passed_until, self.t)

    def elapsed_time(self, end):
        assert self.query() and end.query(), "elapsed_time before the GPU passed both events"
        return (end.t - self.t) * 1e3


@needs_torch
def test_cuda_path_reads_back_lazily(tmp_path, monkeypatch):
    """The CUDA path with a stand-in event: a step is written only once the GPU passed its last event (never waited
    for while fewer than 64 steps are pending), phases get GPU times, and events are reused."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    _FakeEvent.passed_until, _FakeEvent.created = 0.0, 0
    path = tmp_path / "ev.jsonl"
    doc = Doctor(str(path))
    for _ in range(10):
        with doc.step():
            with doc.phase("data"):
                time.sleep(0.004)
            with doc.phase("forward"):
                pass
    assert _steps(path) == [], "written before the GPU passed the steps"
    assert len(doc._pending) == 10
    _FakeEvent.passed_until = time.perf_counter()  # the GPU catches up
    with doc.step():
        pass
    doc._flush()
    written = _steps(path)
    assert len(written) == 11 - doc.lag, [s["step"] for s in written]
    created = _FakeEvent.created
    for _ in range(5):
        with doc.step():
            pass
        _FakeEvent.passed_until = time.perf_counter()
    assert _FakeEvent.created == created, "events are not reused"
    doc.close()
    recs = _records(path)
    assert recs[0]["cuda"] is True and recs[0]["device"] == "Fake GPU"
    # A GPU that never catches up: past 64 pending steps the oldest is waited for, so memory stays bounded.
    doc = Doctor(str(tmp_path / "ev2.jsonl"))
    for _ in range(70):
        with doc.step():
            pass
    assert len(doc._pending) == 64
    doc.close()
    assert len(_steps(tmp_path / "ev2.jsonl")) == 70
    steps = _steps(path)
    assert [s["step"] for s in steps] == list(range(16))
    for s in steps[:10]:
        assert s["phases"]["data"][1] >= 3.5 and s["gpu_ms"] >= s["phases"]["data"][1], s
        assert abs(s["gpu_ms"] - sum(v[1] for v in s["phases"].values())) < 1e-3
