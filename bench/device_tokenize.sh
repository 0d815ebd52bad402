#!/usr/bin/env bash
# Issue 18's tokenizing benchmarks on the GPU machine, one part per device call (each fits the 600 s a call may run):
#
#   bench/device_tokenize.sh [table]   the table: engine 1-16 workers with HF side by side, llama2, bert, multilingual,
#                                      end to end 1 GB each and one .gz (device_tokenize_table.sh; carry build/devrun18)
#   bench/device_tokenize.sh 10g       end to end on the 10 GB corpus to disk (device_tokenize_10g.sh)
#   bench/device_tokenize.sh disk      disk vs /dev/shm, dd, and a CPU profile of the 10 GB run (device_tokenize_disk.sh)
#   bench/device_tokenize.sh compressed  one big .gz/.zst: one gzip member, BGZF, framed zstd, 2 and 10 GB
#                                      (device_tokenize_compressed.sh; carry build/devrun)
#   bench/device_tokenize.sh ab        two binaries alternately on the 10 GB corpus (device_tokenize_ab.sh)
#   bench/device_tokenize.sh round1    the first round's engine/e2e/pyarrow/RSS runs (device_tokenize_round1.sh)
#
# The folder each part expects is named in its script's header (DEVRUN=dir overrides where they take it); each writes
# its output under $OUT. bench/tokenize_device.md holds every part's raw output with the date and the command.
set -uo pipefail
here=$(dirname "$0")
part=${1:-table}
case $part in
table | 10g | disk | compressed | ab | round1 | hwlimit | profile | scaling) exec bash "$here/device_tokenize_$part.sh" ;;
*) echo "usage: $0 [table|10g|disk|compressed|ab|round1|hwlimit|profile|scaling]" >&2; exit 2 ;;
esac
