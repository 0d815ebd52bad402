#!/usr/bin/env python3
"""Where does a training loop's next() go? A loop shaped like train_ref's (a step of GPU work ending in a host sync,
then next()) fed by gload with device="cuda"; prints next()'s p50/p90/p99/mean and, for a client with the native
copier, how often the batch was not ready when asked and the time of take()'s parts. Issue 14 diagnosis
(bench/device_native_probe.sh runs it for two clients against one server)."""

import argparse
import json
import os
import time

import numpy as np
import torch

import gload

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=400)
p.add_argument("--work", type=int, default=40, help="matmuls of 2048² per step (about 0.3 ms each on an H200)")
p.add_argument("--batch-size", type=int, default=8)
p.add_argument("--label", default="")
a = p.parse_args()

parts = {}
misses = [0]
try:
    from gload import _native, _stream
    if _native.AVAILABLE:
        pc = time.perf_counter
        orig_take = _native.Copier.take

        def take(self, seq):
            t0 = pc()
            r = orig_take(self, seq)
            parts.setdefault("copier.take", []).append(pc() - t0)
            if r is None:
                misses[0] += 1
            return r
        _native.Copier.take = take
        orig_wait = _stream.Stream._wait_native

        def wait_native(self, seq, timeout):
            t0 = pc()
            r = orig_wait(self, seq, timeout)
            parts.setdefault("wait_native", []).append(pc() - t0)
            return r
        _stream.Stream._wait_native = wait_native
        orig_alloc = _native.Copier._alloc

        def alloc(self, cap):
            t0 = pc()
            r = orig_alloc(self, cap)
            parts.setdefault("alloc", []).append(pc() - t0)
            return r
        _native.Copier._alloc = alloc

        class _Timed:
            def __init__(self, lib):
                self._lib = lib
                self.gl_give = lib.gl_give
                self.gl_state = lib.gl_state

            def gl_take(self, *args):
                t0 = pc()
                r = self._lib.gl_take(*args)
                parts.setdefault("gl_take", []).append(pc() - t0)
                return r
        _native._held = _Timed(_native._held)
        if os.environ.get("PROBE_CUR"):  # the current stream's handle: timed too
            orig_init = _native.Copier.__init__

            def init(self, *args, **kw):
                orig_init(self, *args, **kw)
                cur = self._cur

                def timed_cur():
                    t0 = pc()
                    r = cur()
                    parts.setdefault("cur", []).append(pc() - t0)
                    return r
                self._cur = timed_cur
            _native.Copier.__init__ = init
except ImportError:
    pass

loader = gload.Loader(os.environ["GLOAD_ADDR"], os.environ.get("GLOAD_DATASET", "corpus"), batch_size=a.batch_size,
                      pad_multiple=128, max_length=1024, transport="shm", prefetch=8, device="cuda", labels=False,
                      keys=("input_ids", "attention_mask"))
w = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)


def batches():
    e = 0
    while True:
        loader.set_epoch(e)
        yield from loader
        e += 1


it = batches()
waits = []
for step in range(a.steps + 20):
    t0 = time.perf_counter()
    b = next(it)
    dt = time.perf_counter() - t0
    x = b["input_ids"]
    y = w
    for _ in range(a.work):
        y = y @ w
    s = int(b["attention_mask"].sum()) + int(y[0, 0].float().item() != 0)  # host sync, as train_ref's int(m.sum())
    if step >= 20:
        waits.append(dt)
loader.close()
t = np.array(waits) * 1e6
out = {"label": a.label, "work": a.work, "steps": a.steps, "next_p50_us": round(float(np.percentile(t, 50)), 1),
       "next_p90_us": round(float(np.percentile(t, 90)), 1), "next_p99_us": round(float(np.percentile(t, 99)), 1),
       "next_mean_us": round(float(t.mean()), 1), "not_ready": misses[0]}
for k, v in parts.items():
    v = np.array(v[20:] if len(v) > 40 else v) * 1e6
    out[k] = {"n": len(v), "p50": round(float(np.percentile(v, 50)), 1), "p99": round(float(np.percentile(v, 99)), 1),
              "mean": round(float(v.mean()), 1)}
print(json.dumps(out))
