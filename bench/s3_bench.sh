#!/usr/bin/env bash
# Object storage, measured side by side on one machine against a real S3 server on loopback (versitygw, POSIX
# backend): download throughput of `gload sync` (every shard verified against gload.index) against the AWS CLI's
# `aws s3 cp --recursive` for the same objects, the cold-cache time to the first batch, and `gload bench feed`
# from the bucket (cold cache, then warm) against the same dataset on local disk.
#
#   bench/s3_bench.sh [MB of corpus text, default 300]
#
# Needs bin/gload and bin/versitygw (make build; SETUP_TEST=1 scripts/setup.sh) and .venv (the Python client's
# packages); makes a throwaway venv with awscli (PyPI) unless $AWS_CLI names one. Everything runs on 127.0.0.1
# and under a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-300}
py=${PYTHON:-.venv/bin/python}
work=$(mktemp -d /tmp/gload-s3bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
aws=${AWS_CLI:-}
if [[ -z $aws ]]; then
	echo "s3bench: installing awscli into $work/venv ..."
	python3 -m venv "$work/venv" && "$work/venv/bin/pip" install -q --disable-pip-version-check awscli
	aws=$work/venv/bin/aws
fi
port=$((20000 + RANDOM % 20000))
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret-key AWS_REGION=us-east-1 \
	AWS_ENDPOINT_URL=http://127.0.0.1:$port
mkdir -p "$work/root/bench"
bin/versitygw --access bench --secret bench-secret-key --region us-east-1 --port 127.0.0.1:$port --quiet posix "$work/root" \
	>"$work/vgw.log" 2>&1 &
sleep 1

echo "s3bench: corpus of $mb MB and its dataset (64 MB shards) ..."
python3 bench/s3_corpus.py "$work/corpus.jsonl" "$mb"
bin/gload tokenize --quiet --tokenizer examples/udhr/tokenizer.json --shard-size 64MB --out "$work/local" "$work/corpus.jsonl" >/dev/null
bin/gload sync "$work/local" s3://bench/ds >/dev/null
bytes=$(du -sb "$work/local" | cut -f1)
echo "s3bench: dataset $((bytes / 1000000)) MB in $(ls "$work/local"/*.arrow | wc -l) shards"

seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
for round in 1 2 3; do
	rm -rf "$work/g" "$work/a"
	tg=$(seconds bin/gload sync --quiet s3://bench/ds "$work/g")
	ta=$(seconds "$aws" s3 cp --recursive --only-show-errors s3://bench/ds "$work/a")
	printf 'round %d: gload sync %.0f MB/s (%.2f s, every shard verified)   aws s3 cp %.0f MB/s (%.2f s)   gload/aws %.2f\n' \
		"$round" "$(echo "$bytes / 1000000 / $tg" | bc -l)" "$tg" "$(echo "$bytes / 1000000 / $ta" | bc -l)" "$ta" "$(echo "$ta / $tg" | bc -l)"
done
cmp <(cd "$work/g" && sha256sum ./*.arrow) <(cd "$work/a" && sha256sum ./*.arrow) && echo "s3bench: both copies identical"

sock=$work/gload.sock
first_shard=$(ls "$work/local"/*.arrow | head -1)
t0=$(date +%s.%N)
bin/gload serve --dataset bench=s3://bench/ds --cache "$work/cache" --listen "unix://$sock" --no-gpu-watch --log-level warn &
PYTHONPATH=pyclient "$py" bench/s3_first_batch.py "$sock" "$t0" "$(stat -c %s "$first_shard")"
for pass in cold warm; do
	echo "s3bench: feed from the bucket ($pass cache):"
	bin/gload bench feed --addr "unix://$sock" --dataset bench --batch-size 16 --transport grpc,shm --clients 1,4 --duration 5s
done
echo "s3bench: feed from local disk:"
bin/gload bench feed --dataset "$work/local" --batch-size 16 --transport grpc,shm --clients 1,4 --duration 5s
