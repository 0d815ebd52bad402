#!/usr/bin/env bash
# Issue 11's numbers on a quiet machine: merging 100 dataset parts (10M rows) with gload merge's code path, and a
# cold server's first batch on the merged dataset beside the unmerged 10M-row baseline (DESIGN: < 1 s).
# Carry build/devrun (bench/prepare_devrun.sh builds merge.test.gz and loader.test.gz into it).
set -euo pipefail
d=${DEVRUN:-build/devrun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in merge loader; do gunzip -c "$d/$t.test.gz" > "$tmp/$t.test"; chmod +x "$tmp/$t.test"; done
echo "== merge 100 parts, then first batch on the merged dataset"
(cd "$tmp" && ./merge.test -test.run '^$' -test.bench Merge100Parts -test.benchtime 3x)
echo "== baseline: first batch of the 10M-row dataset written in 4 shards"
(cd "$tmp" && ./loader.test -test.run '^$' -test.bench FirstBatch10M -test.benchtime 3x)
