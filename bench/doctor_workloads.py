#!/usr/bin/env python3
"""Induced training workloads of one known cause each, for ``gload doctor`` (bench/suites/doctor.sh).

Every workload keeps its data on the GPU already and times itself with ``gload.doctor.Doctor``; ``--strength`` (0..1]
scales the induced effect (1: full, 0.5: halved):

  input      the data path sleeps: the GPU idles ~60%·strength of the step (the sleep is calibrated on the compute)
  optimizer  AdamW(foreach=False, fused=False) over 2400·strength small tensors beside a small model
  host       loss.item() every step, then host work (a Python loop) for ~60%·strength of the step
  padding    batches of uneven lengths padded to the batch's longest row: ~2/3·strength of the tokens are padding
  launch     a tiny 24-layer MLP of width 64/strength, batch 64: thousands of microsecond kernels per second
  compute    large bf16 matmuls (width 8192·strength, batch 8192): compute bound, the healthy case

It runs for --seconds of counted steps after --skip warm-up steps (the doctor's --skip-steps), then prints one JSON
line: the workload, the steps, and (with --nvml-out) an independent pynvml sampler's SM median/P10 over the counted
steps: both from NVML's fine-grained samples (nvmlDeviceGetSamples, what gload reads through go-nvml) and from
nvmlDeviceGetUtilizationRates polled every 20 ms (what train_ref.py reads).

--cpu runs a small version on the CPU (a smoke test of the script itself; no NVML).
"""
import argparse
import json
import os
import random
import sys
import threading
import time

import torch
import torch.nn.functional as F


def _load_doctor():
    """gload.doctor from this checkout, loaded by path: the module needs neither grpc nor the rest of the client."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyclient", "gload", "doctor.py")
    spec = importlib.util.spec_from_file_location("gload_doctor", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Doctor


Doctor = _load_doctor()

EXPECTED = {
    "input": "input pipeline", "optimizer": "optimizer/gradient sync", "host": "host work/sync points",
    "padding": "padding/uneven lengths", "launch": "kernel-launch overhead", "compute": "compute bound (fine)",
}

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("workload", choices=sorted(EXPECTED))
p.add_argument("--strength", type=float, default=1.0)
p.add_argument("--seconds", type=float, default=6.0, help="run time of the counted steps")
p.add_argument("--skip", type=int, default=8, help="warm-up steps before the counted ones (the doctor's --skip-steps)")
p.add_argument("--nvml-out", help="write the independent pynvml sampler's figures (JSON) here")
p.add_argument("--cpu", action="store_true", help="small sizes on the CPU (smoke test)")
args = p.parse_args()
if not 0 < args.strength <= 1:
    p.error("--strength: want 0 < s <= 1")

dev = torch.device("cpu" if args.cpu else "cuda")
dt = torch.float32 if args.cpu else torch.bfloat16
small = args.cpu  # shrink everything on the CPU
torch.manual_seed(0)
random.seed(0)


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


def mlp(width, layers, dtype=dt):
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(width, width, bias=False))
        if i < layers - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods).to(dev, dtype)


def adamw(params, **kw):
    try:
        return torch.optim.AdamW(params, lr=1e-5, **kw)
    except TypeError:  # torch 1.13: no fused/foreach arguments
        return torch.optim.AdamW(params, lr=1e-5)


def busy(ms):
    """Host work: a Python loop holding the GIL for ms milliseconds."""
    end = time.perf_counter() + ms / 1e3
    x = 0
    while time.perf_counter() < end:
        for i in range(200):
            x += i * i
    return x


def calibrate(step, n=5):
    """Mean wall milliseconds of step() over n synchronised steps (after two untimed)."""
    for _ in range(2):
        step()
    sync()
    t = time.perf_counter()
    for _ in range(n):
        step()
    sync()
    return (time.perf_counter() - t) * 1e3 / n


class NvmlSampler(threading.Thread):
    """Independent SM sampler: NVML's fine-grained samples and coarse utilisation rates, through pynvml."""

    def __init__(self):
        super().__init__(daemon=True)
        import pynvml
        self.nv = pynvml
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("GLOAD_DOCTOR_NVML_INDEX", "0")))
        self.fine, self.coarse, self.stop, self.err = {}, [], threading.Event(), None
        self.t0 = self.t1 = 0

    def _fine(self, since):
        try:
            _, samples = self.nv.nvmlDeviceGetSamples(self.h, self.nv.NVML_GPU_UTILIZATION_SAMPLES, since)
        except self.nv.NVMLError as e:
            if "Not Found" not in str(e):
                self.err = str(e)
            return
        for s in samples:
            if s.timeStamp > since:
                self.fine[s.timeStamp] = s.sampleValue.uiVal

    def run(self):
        self.t0 = int(time.time() * 1e6)
        last_fine = 0.0
        while not self.stop.is_set():
            self.coarse.append(self.nv.nvmlDeviceGetUtilizationRates(self.h).gpu)
            if time.perf_counter() - last_fine > 1.0:
                self._fine(self.t0)
                last_fine = time.perf_counter()
            self.stop.wait(0.02)
        self.t1 = int(time.time() * 1e6)
        self._fine(self.t0)

    def result(self):
        fine = sorted(v for t, v in self.fine.items() if self.t0 <= t <= self.t1)
        return {"fine_n": len(fine), "fine_median": pctl(fine, 50), "fine_p10": pctl(fine, 10),
                "fine_below30": sum(v < 30 for v in fine) / len(fine) if fine else None,
                "coarse_n": len(self.coarse), "coarse_median": pctl(sorted(self.coarse), 50),
                "coarse_p10": pctl(sorted(self.coarse), 10), "error": self.err,
                "span_s": (self.t1 - self.t0) / 1e6}


def pctl(vals, q):
    """numpy.percentile's default (linear between closest ranks), as gload computes it."""
    if not vals:
        return None
    h = (len(vals) - 1) * q / 100
    i = int(h)
    if i >= len(vals) - 1:
        return float(vals[-1])
    return vals[i] + (h - i) * (vals[i + 1] - vals[i])


# ---- the workloads: each returns (batches, step(doc, batch)) ------------------------------------------------------

def w_input():
    width, batch = (256, 256) if small else (4096, 8192)
    model = mlp(width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    xs = [torch.randn(batch, width, device=dev, dtype=dt) for _ in range(4)]

    def compute(x, doc=None):
        with phase(doc, "forward"):
            loss = model(x).float().pow(2).mean()
        with phase(doc, "backward"):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    compute_ms = calibrate(lambda: compute(xs[0]))
    share = 0.6 * args.strength  # the GPU's idle share the data path induces
    sleep_s = compute_ms / (1 - share) / 1e3

    def batches():
        i = 0
        while True:
            time.sleep(sleep_s)
            i += 1
            yield xs[i % len(xs)]

    return batches(), lambda doc, x: compute(x, doc), opt, {"compute_ms": compute_ms, "data_ms": sleep_s * 1e3}


def w_optimizer():
    width, batch = (128, 128) if small else (2048, 4096)
    n = max(1, int((200 if small else 2400) * args.strength))
    model = mlp(width, 2, torch.float32)
    tiny = [torch.nn.Parameter(torch.randn(32, 32, device=dev)) for _ in range(n)]
    opt = adamw(list(model.parameters()) + tiny, foreach=False, fused=False)
    xs = [torch.randn(batch, width, device=dev) for _ in range(4)]

    def step(doc, x):
        with phase(doc, "forward"):
            loss = model(x).pow(2).mean() + torch.cat([t.view(-1) for t in tiny]).sum() * 1e-6
        with phase(doc, "backward"):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return cycle(xs), step, opt, {"tensors": n}


def w_host():
    width, batch = (256, 256) if small else (4096, 8192)
    model = mlp(width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    xs = [torch.randn(batch, width, device=dev, dtype=dt) for _ in range(4)]

    def compute(x, doc=None):
        with phase(doc, "forward"):
            loss = model(x).float().pow(2).mean()
        with phase(doc, "backward"):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    compute_ms = calibrate(lambda: compute(xs[0]))
    share = 0.6 * args.strength
    host_ms = compute_ms * share / (1 - share)

    def step(doc, x):
        loss = compute(x, doc)
        with phase(doc, "host"):
            loss.item()  # a sync point every step
            busy(host_ms)  # then host work while the GPU waits

    return cycle(xs), step, opt, {"compute_ms": compute_ms, "host_ms": host_ms}


def w_padding():
    d, rows = (64, 8) if small else (2048, 32)
    lo, hi = (32, 128) if small else (512, 2048)
    model = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)).to(dev, dt)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    batches = []
    for _ in range(16):
        longest = random.randint(lo, hi)
        # One row at the batch's longest, the others shorter by up to strength·(all of it): uneven lengths, padded.
        lengths = [longest] + [max(1, int(longest * (1 - args.strength * random.random() ** 0.5))) for _ in range(rows - 1)]
        lens = torch.tensor(lengths, device=dev)
        mask = (torch.arange(longest, device=dev)[None, :] < lens[:, None])
        batches.append((torch.randn(rows, longest, d, device=dev, dtype=dt), mask))

    def step(doc, b):
        x, mask = b
        doc.tokens(mask)
        with phase(doc, "forward"):
            y = model(x).float().pow(2).mean(-1)
            loss = (y * mask).sum() / mask.sum()
        with phase(doc, "backward"):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return cycle(batches), step, opt, {}


def w_launch():
    width = int(64 / args.strength)
    model = mlp(width, 24, torch.float32)
    opt = adamw(model.parameters(), fused=dev.type == "cuda")
    xs = [torch.randn(64, width, device=dev) for _ in range(4)]

    def step(doc, x):
        with phase(doc, "forward"):
            loss = model(x).pow(2).mean()
        with phase(doc, "backward"):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return cycle(xs), step, opt, {"width": width}


def w_compute():
    width = (256 if small else max(1024, int(8192 * args.strength) // 1024 * 1024))
    batch = 256 if small else 8192
    model = mlp(width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    xs = [torch.randn(batch, width, device=dev, dtype=dt) for _ in range(4)]

    def step(doc, x):
        with phase(doc, "forward"):
            loss = model(x).float().pow(2).mean()
        with phase(doc, "backward"):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return cycle(xs), step, opt, {"width": width}


def cycle(xs):
    while True:
        yield from xs


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def phase(doc, name):
    return doc.phase(name) if doc is not None else _Null()


def main():
    batches, step, opt, info = globals()["w_" + args.workload]()
    sync()
    doc = Doctor()
    doc.watch(opt)
    sampler = None
    t_end = None
    n = 0
    for b in doc.iterate(batches):
        if n == args.skip:
            t_end = time.perf_counter() + args.seconds
            if args.nvml_out:
                try:
                    sampler = NvmlSampler()
                    sampler.start()
                except Exception as e:  # noqa: BLE001 - the comparison is optional
                    info["nvml_error"] = f"{type(e).__name__}: {e}"
        step(doc, b)
        n += 1
        if t_end is not None and time.perf_counter() >= t_end:
            break
    sync()
    if sampler is not None:
        sampler.stop.set()
        sampler.join()
        info["nvml"] = sampler.result()
    doc.close()
    row = {"workload": args.workload, "strength": args.strength, "expected": EXPECTED[args.workload], "steps": n,
           "counted": n - args.skip, **info}
    if args.nvml_out:
        with open(args.nvml_out, "w") as f:
            json.dump(row, f)
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
