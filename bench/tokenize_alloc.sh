#!/usr/bin/env bash
# Issue 18: allocation and GC of the tokenizer engine and of `gload tokenize`, two binaries side by side in one run
# (bench/tokenize_alloc.md has the numbers). Usage:
#   OLD=bin/gload.old NEW=bin/gload T=tokenizer.json.gz IN=corpus.jsonl [W="1 2"] [E2E_W=2] [PROF=1] bench/tokenize_alloc.sh
# For each binary: encode --bench --passes 3 at each worker count of W (GOMAXPROCS the same), then tokenize of IN
# with E2E_W workers: MB/s, GC cycles, bytes allocated per MB of input (estimated from GODEBUG=gctrace=1: the heap at
# each GC's start minus the live heap the cycle before), peak RSS, the summary's stage line. PROF=1 also writes
# --memprofile files to $OUTDIR (read with go tool pprof -sample_index=alloc_space -top BINARY FILE).
set -uo pipefail
OLD=${OLD:-bin/gload.old} NEW=${NEW:-bin/gload}
T=${T:?tokenizer.json(.gz)} IN=${IN:?input .jsonl}
W=${W:-1 2} E2E_W=${E2E_W:-2} OUTDIR=${OUTDIR:-/tmp/tokenize_alloc}
mkdir -p "$OUTDIR"
mb=$(python3 -c "import os,sys; print(os.path.getsize(sys.argv[1])/1e6)" "$IN")
gcsum() { # gctrace file -> "N GCs, X MB allocated (Y B per B of input)"
	python3 - "$1" "$mb" <<'PY'
import re, sys
prev, total, n = 0.0, 0.0, 0
for line in open(sys.argv[1]):
    m = re.match(r"gc \d+ .*?, (\d+)->(\d+)->(\d+) MB", line)
    if not m or "(forced)" in line:
        continue
    a, b, c = map(float, m.groups())
    total += max(a - prev, 0) + max(b - a, 0)
    prev, n = c, n + 1
print(f"{n} GCs, ~{total:.0f} MB allocated ({total / float(sys.argv[2]):.1f} B per B of input)")
PY
}
for bin in "$OLD" "$NEW"; do
	for w in $W; do
		r=$(GOMAXPROCS=$w GODEBUG=gctrace=1 "$bin" encode --bench --passes 3 --tokenizer "$T" --workers "$w" <"$IN" 2>"$OUTDIR/gc.txt" | tail -1)
		echo "== $bin encode --bench --passes 3 --workers $w (GOMAXPROCS=$w): $(python3 -c "import json,sys
try: print(f\"{json.loads(sys.argv[1])['mb_per_s']:.1f} MB/s\")
except ValueError: print('FAILED: ' + open(sys.argv[2]).read()[-300:])" "$r" "$OUTDIR/gc.txt"); 3 passes + load: $(gcsum "$OUTDIR/gc.txt")"
	done
	rm -rf "$OUTDIR/ds"
	prof=()
	[[ ${PROF:-0} == 1 ]] && prof=(--memprofile "$OUTDIR/$(basename "$bin").mem")
	# Peak RSS of the child from getrusage (no /usr/bin/time on the device machines).
	GODEBUG=gctrace=1 python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1] + "/sum.txt", "w"), stderr=open(sys.argv[1] + "/gc.txt", "w")).returncode
open(sys.argv[1] + "/rss.txt", "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024))
sys.exit(rc)' "$OUTDIR" "$bin" tokenize "${prof[@]}" --tokenizer "$T" --out "$OUTDIR/ds" --workers "$E2E_W" --quiet "$IN" ||
		echo "== $bin tokenize failed: $(tail -3 "$OUTDIR/gc.txt")"
	echo "== $bin tokenize --workers $E2E_W: $(grep -o '[0-9.]* MB/s of text' "$OUTDIR/sum.txt"), $(gcsum "$OUTDIR/gc.txt"), peak RSS $(cat "$OUTDIR/rss.txt") MiB"
	echo "   $(grep '^stages' "$OUTDIR/sum.txt")"
	find "$OUTDIR/ds" -type f ! -name gload.verified -exec sha256sum {} + | sed "s|$OUTDIR/ds/||" | sort -k2 >"$OUTDIR/$(basename "$bin").sha256"
done
if cmp -s "$OUTDIR/$(basename "$OLD").sha256" "$OUTDIR/$(basename "$NEW").sha256"; then
	echo "== outputs identical (sha256 of every file but gload.verified, which records mtimes and inodes)"
else
	echo "== OUTPUTS DIFFER: diff $OUTDIR/$(basename "$OLD").sha256 $OUTDIR/$(basename "$NEW").sha256"
fi
rm -rf "$OUTDIR/ds"
