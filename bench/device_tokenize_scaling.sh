#!/usr/bin/env bash
# Issue 18: tokenizing against cores on the GPU machine (16 cores). Engine alone (encode --bench) at 1 and 16
# workers on the corpus x5, end-to-end tokenize of the corpus x25 (1 GB) with the summary's stage line (which
# stage was busy), output on disk and on tmpfs, and a single .gz input. Carry build/devrun-h1 (gload.gz,
# llama3.json.gz, corpus.jsonl.gz; bench/prepare_devrun.sh makes the same files under build/devrun).
set -uo pipefail
d=${DEVRUN:-build/devrun-h1}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
gunzip -kf $d/corpus.jsonl.gz
[[ -x $d/gload ]] || { gunzip -kf $d/gload.gz && chmod +x $d/gload; }
G=$d/gload T=$d/llama3.json.gz
for i in 1 2 3 4 5; do cat $d/corpus.jsonl; done > /tmp/c5.jsonl
{
for w in 1 16; do
	echo "== engine workers=$w GOMAXPROCS=$w (200 MB)"
	GOMAXPROCS=$w $G encode --bench --passes 1 --tokenizer $T --workers $w < /tmp/c5.jsonl 2>&1 | tail -1
done
echo "== engine workers=16 GOGC=400"
GOGC=400 $G encode --bench --passes 2 --tokenizer $T --workers 16 < /tmp/c5.jsonl 2>&1 | tail -1
} 2>&1 | tee "$OUT/engine.txt"
rm -f /tmp/c5.jsonl
for i in $(seq 25); do cat $d/corpus.jsonl; done > /tmp/c25.jsonl
e2e() { # label outdir input args...
	local label=$1 out=$2 in=$3; shift 3
	rm -rf "$out"
	python3 - "$label" "$in" $G tokenize --tokenizer $T --out "$out" "$@" "$in" <<'PY'
import os, resource, subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[3:], capture_output=True, text=True)
secs = time.time() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
size = os.path.getsize(sys.argv[2]) / 1e6
keep = " | ".join(l.strip() for l in r.stdout.splitlines() if l.split(" ")[0] in ("documents", "stages", "bottleneck"))
print(f"== {sys.argv[1]}: rc={r.returncode} {secs:.1f} s, {size / secs:.0f} MB/s of JSONL, peak RSS {rss:.0f} MiB\n   {keep} {r.stderr[-300:] if r.returncode else ''}")
PY
	rm -rf "$out"
}
{
e2e "tokenize 1 GB, 16 workers, out on disk" /tmp/ds /tmp/c25.jsonl
e2e "tokenize 1 GB, 16 workers, out on /dev/shm" /dev/shm/ds /tmp/c25.jsonl
e2e "tokenize 1 GB, 16 workers, --inflight-chunks 256, /dev/shm" /dev/shm/ds /tmp/c25.jsonl --inflight-chunks 256
e2e "tokenize 1 GB, 8 workers, /dev/shm" /dev/shm/ds /tmp/c25.jsonl --workers 8
head -c 400000000 /tmp/c25.jsonl > /tmp/c10.jsonl && gzip -1 -c /tmp/c10.jsonl > /tmp/c10.jsonl.gz
e2e "tokenize 400 MB .gz (one stream), /dev/shm" /dev/shm/ds /tmp/c10.jsonl.gz
} 2>&1 | tee "$OUT/e2e.txt"
rm -rf /tmp/c25.jsonl /tmp/c10.jsonl* /dev/shm/ds /tmp/ds
