"""Writes a JSONL corpus of about MB megabytes cut from the bundled UDHR example (for bench/s3_bench.sh)."""
import gzip
import json
import random
import sys

out, mb = sys.argv[1], int(sys.argv[2])
docs = [json.loads(line)["text"] for line in gzip.open("examples/udhr/corpus.jsonl.gz", "rt")]
rng = random.Random(1)
n = 0
with open(out, "w") as f:
    while n < mb * 1_000_000:
        d = docs[rng.randrange(len(docs))]
        a = rng.randrange(len(d))
        s = json.dumps({"text": d[a:a + rng.randrange(200, 4000)] + " " + str(n)}, ensure_ascii=False) + "\n"
        f.write(s)
        n += len(s.encode())
