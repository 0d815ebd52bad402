#!/usr/bin/env python3
"""Epoch planning side by side: gload's planners against Mosaic streaming and Megatron-core, at the same N.

For each N (rows / samples / documents) it runs, one at a time, each in a subprocess of its own under an address-
space limit (--mem-limit-gb):

- gload exact and gload lazy: `gload bench plan --rows N --policy bucketed --batch-size B --planner exact|lazy
  --world R*W` (one epoch plan over N synthetic lengths; its own JSON line). Not by default, gload packed: the
  exact packed plan at --seq-len with documents split across rows, the packing Megatron's sample index does.
- mosaic: what the local leader of every node of a Mosaic `streaming` StreamingDataset computes at the start of
  every epoch (streaming.base.batching.random.generate_work_random_batching, the default `random` batching): the
  stream resampling (StreamingDataset.resample_streams), streaming.base.partition.get_partitions and
  streaming.base.shuffle.get_shuffle over N samples in shards of --shard-samples, for --nodes x --ranks x --workers
  and per-device batch size B, with the StreamingDataset defaults (partition 'relaxed', shuffle 'py1e',
  num_canonical_nodes = physical nodes, shuffle_block_size = max(4e6 // canonical nodes, 2^18)). The library's own
  functions are called; only the dataset object around them is a stand-in with the attributes they read.
- megatron: GPTDataset's index build (megatron.core.datasets.gpt_dataset, one epoch, num_samples None) over N
  synthetic document lengths: the tokens per epoch (sum of the lengths), the document index
  (_build_document_index), the sample index (helpers.build_sample_idx, the C++ helper) at --seq-len, and the shuffle
  index (_build_shuffle_index). Megatron caches the three arrays as .npy files: "disk" is their nbytes (plus the
  .npy headers). The index build is timed in memory; --megatron-save DIR also times writing them there.

The references' synthetic lengths follow gload's distribution (bucket.Synthetic: log-normal, median 300, sigma 1.2,
clipped to [1, 32768]), drawn with numpy (not the same values). Only Megatron reads lengths; Mosaic partitions by
sample count. Making the lengths is not timed, as in `gload bench plan`.

Reported per run: the time to the first batch (gload: plan + batch 0; references: the whole index build, which has
to finish before batch 0, plus taking batch 0 from it), the run's wall time (process start to exit, imports and
lengths included), the child's peak RSS (getrusage of that child: ru_maxrss), what would go to disk, and the
batches of the epoch. A reference whose estimated peak (from the dtype sizes of its arrays, see estimate_gb) does
not fit the limit is not run: its row says what it needs.

Usage (nice it on a shared machine):
    python bench/plan_compare.py --rows 1e8,1e9 [--gload bin/gload] [--json results.jsonl]
The references need the packages of .ci/requirements-bench.txt (see bench/README.md).
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
import types

GIB = 1 << 30


def synthetic_lengths(n, seed, chunk=1 << 24):
    """gload's length distribution (bucket.Synthetic) drawn with numpy: log-normal, median 300, sigma 1.2, clipped
    to [1, 32768], int32 (the dtype of Megatron's sequence_lengths), made in chunks to bound the temporaries."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = np.empty(n, np.int32)
    mu = math.log(300.0)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        x = rng.lognormal(mu, 1.2, hi - lo)
        np.clip(np.rint(x), 1, 32768, out=x)
        out[lo:hi] = x
    return out


def vm_hwm_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def import_streaming():
    """Imports StreamingDataset and the random batching of mosaicml-streaming without the package's __init__,
    which imports streaming.vision (torchvision, which has no wheel for the Debian torch 1.13 the benchmark runs
    over). The modules used are the library's own."""
    import importlib.util

    spec = importlib.util.find_spec("streaming")
    if spec is None:
        raise SystemExit("mosaicml-streaming is not installed (see .ci/requirements-bench.txt)")
    if "streaming" not in sys.modules:
        pkg = types.ModuleType("streaming")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["streaming"] = pkg
    from streaming.base.batching.random import generate_work_random_batching
    from streaming.base.dataset import StreamingDataset

    return StreamingDataset, generate_work_random_batching


def child_mosaic(a):
    import numpy as np

    StreamingDataset, generate_work = import_streaming()
    from importlib.metadata import version

    n, s = a.rows, a.shard_samples
    shards = -(-n // s)
    samples_per_shard = np.full(shards, s, np.int64)
    samples_per_shard[-1] = n - s * (shards - 1)
    ncn = a.mosaic_canonical_nodes or a.nodes  # StreamingDataset's default for py1e / py1br
    # The attributes StreamingDataset.__init__ sets for one local stream of `shards` shards, no proportion,
    # repeat or choose (so choose = its sample count), defaults otherwise.
    ds = types.SimpleNamespace(
        sampling_method="balanced", sampling_granularity=1, shuffle=True, shuffle_seed=a.seed,
        epoch_seed_change=True, num_streams=1, shard_offset_per_stream=np.zeros(1, np.int64),
        shards_per_stream=np.array([shards], np.int64), samples_per_shard=samples_per_shard,
        sample_offset_per_shard=samples_per_shard.cumsum() - samples_per_shard,
        streams=[types.SimpleNamespace(choose=n)], epoch_size=n, batch_size=a.batch_size,
        partition_algo=a.mosaic_partition, shuffle_algo=a.mosaic_shuffle, num_canonical_nodes=ncn,
        shuffle_block_size=a.mosaic_block or max(4_000_000 // ncn, 1 << 18), initial_physical_nodes=None)
    ds.resample_streams = types.MethodType(StreamingDataset.resample_streams, ds)
    world = types.SimpleNamespace(num_nodes=a.nodes, ranks_per_node=a.ranks, workers_per_rank=a.workers)
    before = vm_hwm_mb()
    t0 = time.perf_counter()
    ids = generate_work(ds, world, a.epoch, 0)  # (nodes, ranks, workers, batches per worker, batch size)
    built = time.perf_counter() - t0
    # What worker 0 of rank 0 then takes from the shared array (StreamingDataset._get_work), and its batch 0.
    worker = ids[0, 0, 0].flatten()
    batch0 = worker[: a.batch_size]
    first = time.perf_counter() - t0
    assert batch0.shape == (a.batch_size,)
    return {"build_s": built, "first_batch_s": first, "batches": int(ids.shape[3]) * a.ranks * a.workers * a.nodes,
            "shape": list(ids.shape), "hwm_before_mb": before,
            "version": "mosaicml-streaming " + version("mosaicml-streaming"),
            "config": f"{a.mosaic_partition}/{a.mosaic_shuffle}, {shards} shards of {s}, canonical nodes {ncn}, "
                      f"block {ds.shuffle_block_size}"}


def child_megatron(a):
    import numpy as np
    from importlib.metadata import version

    from megatron.core.datasets import helpers
    from megatron.core.datasets.gpt_dataset import _build_document_index, _build_shuffle_index

    n = a.rows
    sizes = synthetic_lengths(n, a.seed)  # the IndexedDataset's sequence_lengths (int32)
    before = vm_hwm_mb()
    t0 = time.perf_counter()
    # BlendedMegatronDatasetBuilder: the split's document indices; GPTDataset._get_num_tokens_per_epoch; one epoch
    # (num_samples None), so no separate final epoch; then _build_document_sample_shuffle_indices' three arrays.
    indices = np.arange(0, n, 1, dtype=np.int32)
    tokens = int(np.sum(sizes[indices]))
    rs = np.random.RandomState(a.seed)
    document_index = _build_document_index(indices, 1, rs, False)
    lengths_for_cpp = sizes
    if getattr(helpers, "__file__", "").endswith(".py") and len(document_index) * 2 > len(sizes):
        # megatron-core >= 0.16 (helpers.py over helpers_cpp): GPTDataset copies the lengths before the C++ call
        lengths_for_cpp = sizes.copy()
    sample_index = helpers.build_sample_idx(lengths_for_cpp, document_index, a.seq_len, 1, tokens)
    del lengths_for_cpp
    shuffle_index = _build_shuffle_index(sample_index.shape[0] - 1, sample_index.shape[0] - 1, rs)
    built = time.perf_counter() - t0
    # GPTDataset.__getitem__(0) for batch 0 of B samples: which documents and offsets each sample spans.
    for i in range(a.batch_size):
        j = shuffle_index[i]
        (d0, _), (d1, _) = sample_index[j], sample_index[j + 1]
        _ = document_index[d0 : d1 + 1]
    first = time.perf_counter() - t0
    arrays = {"document_index": document_index, "sample_index": sample_index, "shuffle_index": shuffle_index}
    res = {"build_s": built, "first_batch_s": first, "tokens": tokens, "samples": int(sample_index.shape[0] - 1),
           "batches": int(sample_index.shape[0] - 1) // a.batch_size, "hwm_before_mb": before,
           "disk_bytes": sum(x.nbytes + 128 for x in arrays.values()),
           "dtypes": {k: f"{x.dtype}{list(x.shape)}" for k, x in arrays.items()},
           "version": "megatron-core " + version("megatron-core"), "config": f"seq_len {a.seq_len}, one epoch"}
    if a.megatron_save:
        os.makedirs(a.megatron_save, exist_ok=True)
        t1 = time.perf_counter()
        for k, x in arrays.items():
            np.save(os.path.join(a.megatron_save, k + ".npy"), x, allow_pickle=True)
        res["save_s"] = time.perf_counter() - t1
        for k in arrays:
            os.unlink(os.path.join(a.megatron_save, k + ".npy"))
    return res


def estimate_gb(tool, n, a):
    """Peak bytes of a reference's arrays at n rows, from their dtypes (GiB), plus ~0.5 GiB of interpreter,
    numpy and torch. Derivations:
    megatron: lengths int32 (4n) + split indices int32 (4n) + _build_document_index's numpy.mgrid[0:1, 0:n]
      (int64, 2 x n: 16n, and numpy's temporary for its second row: 8n) = 32n; its astype(int32) (4n) comes once
      the temporary is gone, the sample index (int32 pairs, 8 bytes per 4096-token sample) and the shuffle index
      (uint32) later, all smaller. Measured: 30-31n at 10^8 and 4*10^8.
    mosaic (py1e, one canonical node): kept while shuffling: resample_streams' sample ids (int64, 8n) and the
      partition (int64, 8n); py1e holds the shuffled ids (int64), the samples (float64), their positions
      (float64), argsort's permutation (int64) and the sorted copy (float64): 40n; 56n in all.
      Measured: 56n at 10^8 and 2*10^8. Other shuffles are counted as py1s: 8n for its ids instead of py1e's 40n,
      but the partition's copies (transpose, flatten, padding: about 24n with the 8n of sample ids) then set the
      peak; 48n measured at 10^8."""
    if tool == "megatron":
        b = 32 * n
    elif tool == "mosaic":
        b = (56 if a.mosaic_shuffle == "py1e" else 48) * n
    else:
        return 0.0
    return b / GIB + 0.5


def run_limited(cmd, limit_gb):
    """Runs cmd under RLIMIT_AS = limit_gb; returns (rc, stdout, stderr, wall seconds)."""
    lim = int(limit_gb * GIB)

    def pre():
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pre, text=True)
    out, err = p.communicate()  # waits; p.returncode set
    wall = time.perf_counter() - t0
    # ru_maxrss of RUSAGE_CHILDREN is the largest of all children waited for so far, so each child reports its own
    # peak instead: its VmHWM at exit (gload bench plan's peak_rss_mb is the same measure).
    return p.returncode, out, err, wall


def measure(tool, n, a):
    """One run; returns a result dict (or a 'not measured' one)."""
    row = {"rows": n, "tool": tool}
    if tool.startswith("gload"):
        planner = tool.split()[1]
        if planner in ("exact", "packed") and n > 2**31 - 1:
            row["skip"] = "refused: the exact planner takes at most 2^31−1 rows"
            return row
        policy = ["--policy", "bucketed", "--planner", planner]
        if planner == "packed":  # Megatron's packing: S-token rows, documents split across them (exact only)
            policy = ["--policy", "packed", "--seq-len", str(a.seq_len), "--split-docs", "--planner", "exact"]
        cmd = [a.gload, "bench", "plan", "--rows", str(n), "--batch-size", str(a.batch_size),
               "--world", str(a.ranks * a.workers * a.nodes), "--seed", str(a.seed), "--epoch", str(a.epoch)] + policy
    else:
        need = estimate_gb(tool, n, a)
        if need > a.mem_limit_gb:
            row["skip"] = f"not measured: needs ≈ {need:.0f} GiB (estimate from its arrays' dtypes)"
            row["need_gb"] = need
            return row
        cmd = [sys.executable, os.path.abspath(__file__), "--child", tool, "--rows", str(n)] + child_args(a)
    rc, out, err, wall = run_limited(cmd, a.mem_limit_gb)
    row["wall_s"] = wall
    if rc != 0:
        row["skip"] = f"failed (rc {rc}): " + (err.strip().splitlines() or ["?"])[-1][:200]
        return row
    res = json.loads(out.strip().splitlines()[-1])
    if tool.startswith("gload"):
        row.update(first_batch_s=res["first_batch_s"], peak_rss_mb=res["peak_rss_mb"], batches=res["batches"],
                   batch_us_mean=res["batch_us_mean"], disk_bytes=0,
                   config=f"packed S={a.seq_len}, split docs, B={a.batch_size}" if planner == "packed"
                   else f"bucketed B={a.batch_size}")
        row["version"] = a.gload_version
    else:
        row.update(res)
    return row


def child_args(a):
    args = {"--seed": a.seed, "--epoch": a.epoch, "--batch-size": a.batch_size, "--seq-len": a.seq_len,
            "--shard-samples": a.shard_samples, "--nodes": a.nodes, "--ranks": a.ranks, "--workers": a.workers,
            "--mosaic-partition": a.mosaic_partition, "--mosaic-shuffle": a.mosaic_shuffle,
            "--mosaic-canonical-nodes": a.mosaic_canonical_nodes, "--mosaic-block": a.mosaic_block}
    out = [x for k, v in args.items() for x in (k, str(v))]
    return out + (["--megatron-save", a.megatron_save] if a.megatron_save else [])


def fmt_rows(n):
    e = int(round(math.log10(n)))
    return f"10^{e}" if 10**e == n else f"{n:,}"


def table(rows):
    out = ["| rows | planner | first batch | run wall | peak RSS | disk | batches (B = 16) | configuration |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = r["tool"]
        if "skip" in r:
            out.append(f"| {fmt_rows(r['rows'])} | {name} | {r['skip']} | | | | | |")
            continue
        disk = r.get("disk_bytes", 0)
        d = "0" if not disk else f"{disk / 1e9:.2f} GB"
        if "save_s" in r:
            d += f" (written in {r['save_s']:.1f} s)"
        before = f" ({r['hwm_before_mb'] / 1024:.2f} before the build)" if "hwm_before_mb" in r else ""
        out.append(f"| {fmt_rows(r['rows'])} | {name} | {r['first_batch_s']:.3g} s | {r['wall_s']:.3g} s | "
                   f"{r['peak_rss_mb'] / 1024:.2f} GiB{before} | {d} | {r['batches']:,} | {r['config']} |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="1e8", help="comma-separated N (default 1e8)")
    p.add_argument("--tools", default="gload exact,gload lazy,mosaic,megatron",
                   help="comma-separated, in order: gload exact, gload lazy, gload packed (exact, packed S=--seq-len "
                        "with split documents: Megatron's packing), mosaic, megatron")
    p.add_argument("--gload", default="bin/gload")
    p.add_argument("--mem-limit-gb", type=float, default=14.0, help="address-space limit of every run (GiB)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epoch", type=int, default=0, help="gload's and Mosaic's epoch (Megatron's build has none)")
    p.add_argument("--batch-size", type=int, default=16, help="rows per batch per rank")
    p.add_argument("--seq-len", type=int, default=4096, help="Megatron's sequence length")
    p.add_argument("--shard-samples", type=int, default=1 << 16, help="samples per Mosaic shard")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--ranks", type=int, default=8, help="ranks per node")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    p.add_argument("--mosaic-partition", default="relaxed")
    p.add_argument("--mosaic-shuffle", default="py1e")
    p.add_argument("--mosaic-canonical-nodes", type=int, default=0, help="0: StreamingDataset's default")
    p.add_argument("--mosaic-block", type=int, default=0, help="shuffle_block_size; 0: StreamingDataset's default")
    p.add_argument("--megatron-save", default="", help="also time writing Megatron's .npy files into this folder")
    p.add_argument("--json", default="", help="append one JSON line per run to this file")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        a.rows = int(float(a.rows))
        res = {"mosaic": child_mosaic, "megatron": child_megatron}[a.child](a)
        res["peak_rss_mb"] = vm_hwm_mb()
        print(json.dumps(res))
        return
    tools = [t.strip() for t in a.tools.split(",")]
    known = ("gload exact", "gload lazy", "gload packed", "mosaic", "megatron")
    if any(t not in known for t in tools):
        p.error(f"--tools: want some of {', '.join(known)}, got {a.tools!r}")
    a.gload_version = subprocess.run([a.gload, "--version"], capture_output=True, text=True).stdout.strip()
    rows = []
    for n in [int(float(x)) for x in a.rows.split(",")]:
        for tool in tools:
            print(f"plan_compare: {tool} at {n} rows …", file=sys.stderr, flush=True)
            r = measure(tool, n, a)
            print(json.dumps(r), file=sys.stderr, flush=True)
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
            rows.append(r)
    print(table(rows))


if __name__ == "__main__":
    main()
