#!/usr/bin/env bash
# Issue 38 on the GPU machine (16 cores): gload bench plan at 10^8 (exact and lazy), 10^10 (bucketed), 10^9 (tokens
# and packed, lazy: their counting pass on 16 cores), then gload bench webscale on 2^31 + 2^24 one-token rows
# written to the local disk (25 GB; removed at exit): server open, first batch, peak RSS, and a slice past 2^31 read
# exactly once by 4×2 consumers and resumed on 3×2. bench/device.sh webscale (about 5 minutes); writes plan.jsonl and
# webscale.json to $OUT.
set -uo pipefail
. bench/lib.sh
echo "cores $(nproc); $(free -g | awk '/^Mem:/ {print $2 " GiB memory"}'); $(df -h "$W" | awk 'NR==2 {print $4 " free in " $6}')"
{
	$G bench plan --rows 100000000 --planner exact
	$G bench plan --rows 100000000 --planner lazy
	$G bench plan --rows 10000000000
	$G bench plan --rows 1000000000 --policy tokens --planner lazy
	$G bench plan --rows 1000000000 --policy packed --split-docs --planner lazy --samples 100
} | tee "$OUT/plan.jsonl"
$G bench webscale --dir "$W/web" --rows 2164260864 --writers "$(nproc)" --batches 3000 \
	> "$OUT/webscale.json" 2> "$OUT/webscale.err"
echo "webscale: exit $?"
cat "$OUT/webscale.json"
