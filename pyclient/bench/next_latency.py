#!/usr/bin/env python3
"""How fast does gload hand batches to a training loop? Prints one JSON document.

For each transport (shm, grpc) and output (numpy; torch CPU; torch on CUDA when available; over shm also numpy with
``zero_copy=True``: "numpy-zc" with the default keys, input_ids as a view of the slot and attention_mask made per
batch, and "numpy-zc-ids", input_ids and lengths only, both views — the hand-off's floor):
  - next() latency with a batch ready: a simulated step of ``--step-us`` runs between calls so that the next batch is
    in its slot (or converted and queued); p50/p99/max of next() over ``--ready`` calls, twice: the step as a sleep
    (the core idles: caches and clocks go cold, the worst case) and as a busy wait ("ready_busy_*": a loop whose CPU
    stays busy between calls, as one launching CUDA kernels or spinning in a CUDA sync does);
  - throughput: next() in a tight loop for ``--batches`` batches of ``--rows``×``--length`` tokens: batches/s and
    MB/s of input_ids.

By default it writes a dataset of fixed-length rows (``gload tokenize`` on generated text, truncated to --length)
and starts ``gload serve`` on a unix socket in a temporary directory (``--gload-bin``, default $GLOAD_BIN or
bin/gload); ``--addr`` and ``--dataset`` use a running server instead.

usage: next_latency.py [--addr unix:///run/gload.sock --dataset wiki] [--rows 16 --length 1024] [--batches 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

import gload  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def make_dataset(gload_bin: str, out: Path, rows: int, length: int) -> Path:
    """rows documents of at least length tokens (truncated to length by the tokenizer run)."""
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "tokens", "batch", "epoch", "gload", "ring", "slot", "the", "of"]
    corpus = out / "corpus.jsonl"  # (not gzipped: Python's gzip took a minute for 32768 rows)
    docs = [json.dumps({"text": " ".join(rng.choice(words) for _ in range(length + 64))}) + "\n" for _ in range(64)]
    with open(corpus, "w") as f:
        for i in range(rows):
            f.write(docs[i % len(docs)])
    ds = out / "ds"
    subprocess.run([gload_bin, "tokenize", "--quiet", "--tokenizer", str(REPO / "examples/udhr/tokenizer.json"),
                    "--max-length", str(length), "--min-length", str(length), "--out", str(ds), str(corpus)],
                   check=True, stdout=subprocess.DEVNULL)
    return ds


def start_server(gload_bin: str, ds: Path, sock: Path) -> subprocess.Popen:
    addr = f"unix://{sock}"
    p = subprocess.Popen([gload_bin, "serve", "--listen", addr, "--log-level", "warn", "--dataset", f"bench={ds}"])
    deadline = time.monotonic() + 30
    while not sock.exists():
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("gload serve did not start")
        time.sleep(0.05)
    return p


def pct(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q))]


class Batches:
    """Endless batches over epochs."""

    def __init__(self, loader: gload.Loader) -> None:
        self.loader = loader
        self.epoch = 0
        self.it = iter(loader)

    def next(self):
        while True:
            try:
                return self.loader.next()
            except StopIteration:
                self.epoch += 1
                self.loader.set_epoch(self.epoch)
                self.it = iter(self.loader)


def run(args, addr: str, dataset: str, transport: str, output: str) -> dict:
    kw = dict(batch_size=args.rows, pad_multiple=args.length, max_length=args.length, prefetch=args.prefetch,
              transport=transport, labels=False, warmup=True)
    if output.startswith("numpy"):
        kw["return_tensors"] = "np"
        if output.startswith("numpy-zc"):
            kw["zero_copy"] = True
        if output == "numpy-zc-ids":
            kw["keys"] = ["input_ids", "lengths"]
    else:
        kw["return_tensors"] = "pt"
        if output == "cuda":
            kw["device"] = "cuda"
    loader = gload.Loader(addr, dataset, **kw)
    src = Batches(loader)
    sync = (lambda: torch.cuda.synchronize()) if output == "cuda" else (lambda: None)
    shape = None
    for _ in range(50):  # warm up: stream open, allocator, CUDA context
        b = src.next()
        shape = tuple(b["input_ids"].shape)
    sync()
    # Ready-batch latency: a step long enough for the reader thread to have the next batch queued.
    step = args.step_us / 1e6

    def spin(s: float) -> None:
        end = time.perf_counter() + s
        while time.perf_counter() < end:
            pass

    epoch_starts = []

    def ready(pause) -> list:
        lat = []
        for _ in range(args.ready):
            pause(step)
            epoch = src.epoch
            t0 = time.perf_counter()
            src.next()
            (lat if src.epoch == epoch else epoch_starts).append(time.perf_counter() - t0)
        return lat

    # (A call that ends an epoch opens the next epoch's stream: not a ready batch, reported apart.)
    lat = ready(time.sleep)
    busy = ready(spin)
    # Throughput.
    t0 = time.perf_counter()
    for _ in range(args.batches):
        b = src.next()
    sync()
    el = time.perf_counter() - t0
    loader.close()
    mb = args.batches * args.rows * args.length * 4 / 1e6
    return {
        "transport": transport, "output": output, "shape": shape, "prefetch": args.prefetch,
        "ready_next_p50_us": round(1e6 * pct(lat, 0.5), 1), "ready_next_p99_us": round(1e6 * pct(lat, 0.99), 1),
        "ready_next_max_us": round(1e6 * max(lat), 1), "ready_calls": len(lat),
        "ready_busy_p50_us": round(1e6 * pct(busy, 0.5), 1), "ready_busy_p99_us": round(1e6 * pct(busy, 0.99), 1),
        "epoch_start_next_us": [round(1e6 * x, 1) for x in epoch_starts],
        "batches_per_s": round(args.batches / el, 1), "input_ids_MB_per_s": round(mb / el, 1),
        "batches": args.batches, "epochs_crossed": src.epoch,
    }


def cpu_loop(args, addr: str, dataset: str, transport: str) -> dict:
    """A CPU-bound pure-Python step (--cpu-work iterations of arithmetic) timed alone, without a Loader and then
    with one drained beside it (one next() per step, outside the timed work): how much the client's background work
    (threads, messages) slows the loop."""
    def work(n: int) -> int:
        s = 0
        for i in range(n):
            s += i * i
        return s

    def timed(steps: int, loader=None) -> float:
        src = Batches(loader) if loader is not None else None
        total = 0.0
        for _ in range(steps):
            if src is not None:
                src.next()
            t0 = time.perf_counter()
            work(args.cpu_work)
            total += time.perf_counter() - t0
        return total / steps

    kw = dict(batch_size=args.rows, pad_multiple=args.length, max_length=args.length, prefetch=args.prefetch,
              transport=transport, labels=False, return_tensors="np")
    rounds = []
    for _ in range(3):  # alternate, so that drift of the machine hits both
        base = timed(args.cpu_steps)
        loader = gload.Loader(addr, dataset, **kw)
        try:
            with_loader = timed(args.cpu_steps, loader)
        finally:
            loader.close()
        rounds.append((base, with_loader))
    base = min(r[0] for r in rounds)
    with_loader = min(r[1] for r in rounds)
    return {"transport": transport, "output": "cpu-loop", "step_us_alone": round(1e6 * base, 1),
            "step_us_with_loader": round(1e6 * with_loader, 1), "slowdown_pct": round(100 * (with_loader / base - 1), 2),
            "steps": args.cpu_steps, "rounds": len(rounds)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", help="a running server (default: start one)")
    p.add_argument("--dataset", default="bench")
    p.add_argument("--gload-bin", default=os.environ.get("GLOAD_BIN", str(REPO / "bin" / "gload")))
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--length", type=int, default=1024)
    # 32768 rows: an epoch of 2048 batches of 16, so that the ready calls do not run into epoch starts (each opens a
    # new stream and maps a new ring: the first batch of each slot then builds its views).
    p.add_argument("--dataset-rows", type=int, default=32768)
    p.add_argument("--batches", type=int, default=20000)
    p.add_argument("--ready", type=int, default=1000, help="ready calls per step model (sleep, busy)")
    p.add_argument("--step-us", type=float, default=1000.0, help="simulated step between ready calls (µs)")
    p.add_argument("--prefetch", type=int, default=8)
    p.add_argument("--transports", default="shm,grpc")
    p.add_argument("--outputs", default="auto",
                   help="numpy,numpy-zc,numpy-zc-ids,torch,cuda (auto: those available; the zc ones over shm only)")
    p.add_argument("--cpu-steps", type=int, default=0, help="also measure a CPU-bound loop's slowdown (steps; 0: no)")
    p.add_argument("--cpu-work", type=int, default=20000, help="iterations of the CPU-bound step (about 1 ms)")
    args = p.parse_args()

    outputs = args.outputs.split(",")
    if args.outputs == "auto":
        outputs = ["numpy", "numpy-zc", "numpy-zc-ids"]
        if torch is not None:
            outputs.append("torch")
            if torch.cuda.is_available():
                outputs.append("cuda")
    tmp = Path(tempfile.mkdtemp(prefix="gload-bench-"))
    server = None
    try:
        addr = args.addr
        if addr is None:
            ds = make_dataset(args.gload_bin, tmp, args.dataset_rows, args.length)
            server = start_server(args.gload_bin, ds, tmp / "s.sock")
            addr = f"unix://{tmp / 's.sock'}"
        results = [run(args, addr, args.dataset, t, o) for t in args.transports.split(",") for o in outputs
                   if t == "shm" or not o.startswith("numpy-zc")]
        if args.cpu_steps:
            results += [cpu_loop(args, addr, args.dataset, t) for t in args.transports.split(",")]
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    info = {
        "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
        "numpy": __import__("numpy").__version__, "grpcio": __import__("grpc").__version__,
        "protobuf": __import__("google.protobuf", fromlist=["__version__"]).__version__,
        "torch": None if torch is None else torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch is not None and torch.cuda.is_available() else None,
        "shm_doorbell": gload.loader._SHM_DOORBELL,
    }
    print(json.dumps({"info": info, "results": results}, indent=1))


if __name__ == "__main__":
    main()
