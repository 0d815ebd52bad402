#!/usr/bin/env python3
"""Side-by-side tokenizer throughput: gload's Go engine against Hugging Face tokenizers, same file, same run.

For each engine and thread count it reads every document first, then times tokenization alone, and prints MB/s,
tokens/s and the ratio gload / HF. It also checks that both produce the same ids on every document.

usage: bench/tokenizer.py --gload bin/gload --tokenizer tokenizer.json[.gz] --corpus corpus.jsonl [--threads 1,16]
needs: pip install tokenizers (0.23.2 for the reference numbers)
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time


def load_tokenizer_json(path):
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8")


def hf_worker(tokenizer_path, corpus, threads, passes=1):
    """Runs in a subprocess so RAYON_NUM_THREADS takes effect: prints one JSON line (the fastest of passes)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(load_tokenizer_json(tokenizer_path))
    texts = [json.loads(l)["text"] for l in open(corpus, encoding="utf-8") if l.strip()]
    size = sum(len(t.encode("utf-8")) for t in texts)
    secs = None
    for _ in range(max(passes, 1)):
        start = time.perf_counter()
        if threads == 1:
            encs = [tok.encode(t, add_special_tokens=False) for t in texts]
        else:
            encs = tok.encode_batch(texts, add_special_tokens=False)
        took = time.perf_counter() - start
        secs = took if secs is None else min(secs, took)
    ntok = sum(len(e.ids) for e in encs)
    print(json.dumps({"engine": "hf", "workers": threads, "passes": passes, "bytes": size, "tokens": ntok, "seconds": secs,
                      "mb_per_s": size / secs / 1e6, "tokens_per_s": ntok / secs}))
    if os.environ.get("GLOAD_BENCH_IDS"):
        with open(os.environ["GLOAD_BENCH_IDS"], "w") as f:
            for e in encs:
                f.write(json.dumps(e.ids) + "\n")


def run_json(cmd, env=None, stdin=None):
    out = subprocess.run(cmd, env=env, stdin=stdin, check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out.decode().strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gload", default="bin/gload")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--corpus", required=True)
    p.add_argument("--threads", default=f"1,{os.cpu_count()}")
    p.add_argument("--repeat", type=int, default=1, help="runs per configuration (the best is kept)")
    p.add_argument("--passes", type=int, default=2,
                   help="passes over the corpus inside each run, fastest reported (both engines: warm caches)")
    p.add_argument("--skip-parity", action="store_true")
    p.add_argument("--json", help="append results as JSON lines to this file")
    a = p.parse_args()
    rows = []
    for threads in [int(t) for t in a.threads.split(",")]:
        best = {}
        for _ in range(a.repeat):
            env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
            hf = run_json([sys.executable, __file__, "--hf-worker", a.tokenizer, a.corpus, str(threads), str(a.passes)],
                          env=env)
            with open(a.corpus, "rb") as f:
                go = run_json([a.gload, "encode", "--bench", "--passes", str(a.passes), "--tokenizer", a.tokenizer,
                               "--workers", str(threads)],
                              stdin=f, env=dict(os.environ, GOMAXPROCS=str(threads)))
            for r in (hf, go):
                k = r["engine"]
                if k not in best or r["seconds"] < best[k]["seconds"]:
                    best[k] = r
        hf, go = best["hf"], best["go"]
        if hf["tokens"] != go["tokens"]:
            print(f"warning: token counts differ: hf {hf['tokens']} gload {go['tokens']}", file=sys.stderr)
        rows.append((threads, hf, go))
    print(f"corpus {a.corpus}: {rows[0][1]['bytes'] / 1e6:.1f} MB; tokenizer {a.tokenizer}")
    print(f"{'threads':>7} {'HF MB/s':>9} {'gload MB/s':>11} {'HF Mtok/s':>10} {'gload Mtok/s':>13} {'ratio':>7}")
    for threads, hf, go in rows:
        print(f"{threads:>7} {hf['mb_per_s']:>9.2f} {go['mb_per_s']:>11.2f} {hf['tokens_per_s'] / 1e6:>10.3f} "
              f"{go['tokens_per_s'] / 1e6:>13.3f} {go['mb_per_s'] / hf['mb_per_s']:>6.1f}x")
    if a.json:
        with open(a.json, "a") as f:
            for threads, hf, go in rows:
                f.write(json.dumps({"threads": threads, "hf": hf, "gload": go}) + "\n")
    if not a.skip_parity:
        check_parity(a)


def check_parity(a):
    """Compares every document's ids: gload encode output against HF's."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        ref = os.path.join(d, "hf.jsonl")
        env = dict(os.environ, RAYON_NUM_THREADS=str(os.cpu_count()), GLOAD_BENCH_IDS=ref)
        subprocess.run([sys.executable, __file__, "--hf-worker", a.tokenizer, a.corpus, "0", "1"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        with open(a.corpus, "rb") as f:
            out = subprocess.run([a.gload, "encode", "--tokenizer", a.tokenizer], stdin=f, check=True,
                                 stdout=subprocess.PIPE).stdout.decode().splitlines()
        want = [json.loads(l) for l in open(ref)]
        got = [json.loads(l)["ids"] for l in out if l.strip()]
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
        if len(got) != len(want):
            bad.append(-1)
        print(f"parity: {len(want) - len(bad)}/{len(want)} documents token-identical"
              + (f"; first differing documents {bad[:5]}" if bad else ""))
        if bad:
            sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--hf-worker":
        hf_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
