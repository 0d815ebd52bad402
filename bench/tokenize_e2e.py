#!/usr/bin/env python3
"""End-to-end `gload tokenize` against the Hugging Face way (tokenizers encode_batch + pyarrow writing), same corpus,
same run: wall time from JSONL to an Arrow dataset on disk, MB/s of text and the ratio.

usage: bench/tokenize_e2e.py --gload bin/gload --tokenizer tokenizer.json[.gz] --corpus corpus.jsonl [--workers N]
needs: pip install tokenizers pyarrow
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import tempfile
import time


def hf_tokenize(tokenizer, corpus, out, chunk=1000):
    import pyarrow as pa
    from tokenizers import Tokenizer

    data = open(tokenizer, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    tok = Tokenizer.from_str(data.decode("utf-8"))
    schema = pa.schema([("input_ids", pa.list_(pa.int32()))])
    size = 0
    os.makedirs(out, exist_ok=True)
    with open(corpus, encoding="utf-8") as f, pa.OSFile(os.path.join(out, "data-00000-of-00001.arrow"), "wb") as sink:
        w = pa.ipc.new_stream(sink, schema)
        batch = []

        def flush():
            encs = tok.encode_batch(batch, add_special_tokens=False)
            arr = pa.array([e.ids for e in encs], type=pa.list_(pa.int32()))
            w.write_batch(pa.record_batch([arr], schema=schema))

        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)["text"]
            size += len(t.encode("utf-8"))
            batch.append(t)
            if len(batch) == chunk:
                flush()
                batch = []
        if batch:
            flush()
        w.close()
    return size


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gload", default="bin/gload")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--corpus", required=True)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--json", help="append the result as a JSON line to this file")
    a = p.parse_args()
    d = tempfile.mkdtemp()
    try:
        t0 = time.perf_counter()
        size = hf_tokenize(a.tokenizer, a.corpus, os.path.join(d, "hf"))
        hf = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([a.gload, "tokenize", "--quiet", "--tokenizer", a.tokenizer, "--workers", str(a.workers),
                        "--out", os.path.join(d, "gload"), a.corpus], check=True, stdout=subprocess.DEVNULL)
        go = time.perf_counter() - t0
    finally:
        shutil.rmtree(d)
    res = {"corpus_mb": size / 1e6, "workers": a.workers, "hf_s": hf, "gload_s": go,
           "hf_mb_per_s": size / hf / 1e6, "gload_mb_per_s": size / go / 1e6, "ratio": hf / go}
    print(f"corpus {size / 1e6:.1f} MB, {a.workers} cores: HF encode_batch+pyarrow {hf:.2f} s ({res['hf_mb_per_s']:.2f} MB/s), "
          f"gload tokenize {go:.2f} s ({res['gload_mb_per_s']:.2f} MB/s): {res['ratio']:.1f}x")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
