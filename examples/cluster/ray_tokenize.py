"""Tokenize a corpus as N Ray tasks (gload tokenize --task I/N) and merge the parts (gload merge).

    pip install ray
    python examples/cluster/ray_tokenize.py --tokenizer tokenizer.json --out /shared/out --tasks 16 /shared/corpus

Every task runs the gload binary on whichever node Ray places it; parts and the output must be on a filesystem all
nodes share (merge hard-links the shards). A task that fails is retried by Ray and resumes its part (--resume).
On one machine, ``ray.init()`` starts a local cluster. The merged dataset is the same for any --tasks.
"""

import argparse
import os
import subprocess
import sys


def tokenize_part(gload, tokenizer, out, task, tasks, inputs, extra):
    part = os.path.join(out, "parts", "part-%05d" % task)
    if os.path.exists(os.path.join(part, "gload.index")):
        return part  # already complete (a retried driver)
    cmd = [gload, "tokenize", "--quiet", "--tokenizer", tokenizer, "--out", part, "--task", "%d/%d" % (task, tasks)]
    if os.path.exists(os.path.join(part, "gload.progress.json")):
        cmd.append("--resume")
    subprocess.run(cmd + list(extra) + list(inputs), check=True)
    return part


def run(tokenizer, out, tasks, inputs, gload="gload", extra=(), num_cpus_per_task=1):
    """Runs the tasks on the current Ray cluster (ray.init() first), merges, and returns the merged directory."""
    import ray

    remote = ray.remote(num_cpus=num_cpus_per_task, max_retries=3)(tokenize_part)
    os.makedirs(os.path.join(out, "parts"), exist_ok=True)
    parts = ray.get([remote.remote(gload, tokenizer, out, i, tasks, inputs, extra) for i in range(tasks)])
    merged = os.path.join(out, "dataset")
    subprocess.run([gload, "merge", "--out", merged, "--overwrite"] + parts, check=True)
    return merged


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", type=int, required=True)
    ap.add_argument("--gload", default=os.environ.get("GLOAD_BIN", "gload"))
    ap.add_argument("--address", default=None, help="Ray cluster address (default: a local cluster)")
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args(argv)
    import ray

    ray.init(address=a.address)
    print(run(a.tokenizer, a.out, a.tasks, a.inputs, gload=a.gload))


if __name__ == "__main__":
    sys.exit(main())
