#!/usr/bin/env bash
# Issue 11's numbers on a quiet machine: merging 100 dataset parts (10M rows) with gload merge's code path, and a
# cold server's first batch on the merged dataset beside the unmerged 10M-row baseline (DESIGN: < 1 s).
# bench/device.sh identity (about 1 minute; build/devrun holds merge.test.gz and loader.test.gz).
set -euo pipefail
. bench/lib.sh
tmp=$W
for t in merge loader; do gunzip -c "$d/$t.test.gz" > "$tmp/$t.test"; chmod +x "$tmp/$t.test"; done
echo "== merge 100 parts, then first batch on the merged dataset"
(cd "$tmp" && ./merge.test -test.run '^$' -test.bench Merge100Parts -test.benchtime 3x) | tee -a "$OUT/identity.txt"
echo "== baseline: first batch of the 10M-row dataset written in 4 shards"
(cd "$tmp" && ./loader.test -test.run '^$' -test.bench FirstBatch10M -test.benchtime 3x) | tee -a "$OUT/identity.txt"
