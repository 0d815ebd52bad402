#!/usr/bin/env python3
"""Runs one `gload tokenize` (or any command) and prints one result for the device scripts of issue 18
(bench/suites/tokenize_*.sh): its exit status, wall time, MB/s of the input file, peak RSS, and the
lines of gload's summary that say what happened (documents, tokens, shards, wall, stages, bottleneck); the tail of
stderr when it failed. Standard library only: the GPU machine's Python runs it.

usage: timed_tokenize.py LABEL INPUT CMD [ARGS...]

INPUT is the file whose size the rate is of: give the plain JSONL when the command reads a compressed copy of it
(MB/s of JSON Lines).
"""
import os
import resource
import subprocess
import sys
import time

KEEP = ("documents", "tokens", "shards", "wall", "stages", "bottleneck", "gc")


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    label, path, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
    size = os.path.getsize(path) / 1e6
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.time() - t
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # this process's one child: its peak
    keep = " | ".join(" ".join(ln.split()) for ln in r.stdout.splitlines() if ln.split(" ")[0] in KEEP)
    if r.returncode:
        print(f"== {label}: FAILED rc={r.returncode} after {secs:.1f} s ({size:.0f} MB input), peak RSS {rss:.0f} MiB\n"
              f"   {keep}\n   stderr: {r.stderr[-500:]}", flush=True)
        return
    print(f"== {label}: rc=0 {size:.0f} MB in {secs:.1f} s = {size / secs:.0f} MB/s of input, peak RSS {rss:.0f} MiB\n"
          f"   {keep}", flush=True)


if __name__ == "__main__":
    main()
