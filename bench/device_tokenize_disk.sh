#!/usr/bin/env bash
# Issue 18: is `gload tokenize`'s end-to-end speed on the GPU machine bound by its disk? The local disk's own write
# speed (dd of 8 GB with fdatasync, the same bytes the shards are: page cache, then the disk), then the 10 GB corpus
# (bench/device_tokenize_10g.sh) tokenized into /dev/shm (no disk) with a CPU profile and into the disk. About 4
# minutes. Carry build/devrunP. Writes disk.txt and cpu-10g-shm.pprof to $OUT.
set -uo pipefail
d=${DEVRUN:-build/devrunP}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[[ -x $d/gload ]] || { gunzip -kf $d/gload.gz && chmod +x $d/gload; }
W=$(mktemp -d /tmp/gload-disk.XXXXXX)
trap 'rm -rf "$W" /dev/shm/gload-disk-ds' EXIT
run() { # label out [gload flags...]
	local label=$1 out=$2; shift 2
	rm -rf "$out"
	python3 bench/timed_tokenize.py "$label" "$W/go10g.jsonl" $d/gload tokenize "$@" --tokenizer $d/llama3.json.gz --out "$out" "$W/go10g.jsonl"
	du -sh "$out"
	rm -rf "$out"
}
{
df -h /tmp /dev/shm | tail -2
echo "== dd: 8 GB to the local disk, fdatasync at the end $(date -u +%T)"
dd if=/dev/zero of="$W/zero" bs=1M count=8000 conv=fdatasync 2>&1 | tail -1
rm -f "$W/zero"
echo "== dd: 16 GB to the local disk without a sync (the page cache and its writeback, as the shards are written); vm: dirty_ratio $(cat /proc/sys/vm/dirty_ratio)% dirty_background_ratio $(cat /proc/sys/vm/dirty_background_ratio)% $(date -u +%T)"
dd if=/dev/zero of="$W/zero" bs=1M count=16000 2>&1 | tail -1
rm -f "$W/zero"
sync
gunzip -c $d/corpus.jsonl.gz > "$W/go.jsonl"
for i in $(seq 25); do cat "$W/go.jsonl"; done > "$W/go1g.jsonl"
for i in $(seq 10); do cat "$W/go1g.jsonl"; done > "$W/go10g.jsonl"
rm -f "$W/go1g.jsonl"
cat "$W/go10g.jsonl" > /dev/null
run "10 GB into /dev/shm, 16 workers, CPU profile" /dev/shm/gload-disk-ds --cpuprofile "$OUT/cpu-10g-shm.pprof"
run "10 GB into the local disk, 16 workers" "$W/ds"
echo "== done $(date -u +%T)"
} 2>&1 | tee "$OUT/disk.txt"
