#!/usr/bin/env bash
# SFT tokenizing on the GPU machine (16 cores): gload tokenize --format chat vs plain-text gload tokenize of the same
# conversations, and vs datasets.map(apply_chat_template + the same assistant-only label rule, num_proc=16) — the
# pipeline a user would otherwise run. WORKERS (default 16) sets gload's workers and num_proc. build/devrun holds the chat fixture and the datasets/dill/multiprocess wheels,
# which the GPU image lacks. bench/device.sh sft (about 1 minute); writes sft*.txt to $OUT.
set -euo pipefail
. bench/lib.sh
CLEAN+=(/tmp/sft /tmp/site)
if compgen -G "$d/whl/*.whl" >/dev/null; then
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $d/whl/*.whl
	export PYTHONPATH=/tmp/site
fi
python3 -c 'import datasets, transformers, tokenizers; print("datasets", datasets.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__)' | tee "$OUT/sft_versions.txt"
mkdir -p /tmp/sft/tok
gunzip -c $d/llama3.json.gz > /tmp/sft/tok/tokenizer.json
cp $d/llama3-instruct_tokenizer_config.json /tmp/sft/tok/tokenizer_config.json
# The fixture's 300 message conversations, 60 times over (18,000 conversations), and their contents as plain text.
python3 - "$d/conversations.jsonl.gz" <<'PY'
import gzip, json, sys
recs = [json.loads(l) for l in gzip.open(sys.argv[1], "rt", encoding="utf-8")]
recs = [r for r in recs if "messages" in r]
with open("/tmp/sft/chat.jsonl", "w") as f, open("/tmp/sft/plain.jsonl", "w") as g:
    for _ in range(60):
        for r in recs:
            f.write(json.dumps({"messages": r["messages"]}, ensure_ascii=False) + "\n")
            g.write(json.dumps({"text": "\n".join(m["content"] for m in r["messages"])}, ensure_ascii=False) + "\n")
PY
ls -l /tmp/sft/chat.jsonl /tmp/sft/plain.jsonl | tee "$OUT/sft_inputs.txt"
NW=${WORKERS:-16}
# Best of 3 runs each (the first warms the page cache); --template-date fixed so that runs are comparable.
t() { local best=; for _ in 1 2 3; do local s=$EPOCHREALTIME; "$@" >/dev/null; local x; x=$(python3 -c "print(round($EPOCHREALTIME - $s, 3))"); best=$(python3 -c "print(min(float('${best:-1e9}'), $x))"); done; echo "$best"; }
chat=$(t $G tokenize --format chat --quiet --workers $NW --template-date 2024-07-23 --tokenizer /tmp/sft/tok/tokenizer.json --out /tmp/sft/ds_chat --overwrite /tmp/sft/chat.jsonl)
plain=$(t $G tokenize --quiet --workers $NW --tokenizer /tmp/sft/tok/tokenizer.json --out /tmp/sft/ds_plain --overwrite /tmp/sft/plain.jsonl)
mb=$(python3 -c 'import os; print(round(os.path.getsize("/tmp/sft/chat.jsonl")/1e6, 2))')
echo "gload chat  ($NW workers): $chat s for $mb MB of JSONL = $(python3 -c "print(round($mb/$chat, 1))") MB/s" | tee "$OUT/sft.txt"
echo "gload plain ($NW workers): $plain s (same conversations' contents as text) = $(python3 -c "print(round($mb/$plain, 1))") MB/s of the chat JSONL" | tee -a "$OUT/sft.txt"
echo "chat / plain time per MB: $(python3 -c "print(round($chat/$plain, 2))")x (goal <= 1.5x)" | tee -a "$OUT/sft.txt"
echo "$chat" > /tmp/sft/chat_seconds
python3 - <<'PY' 2>&1 | tee -a "$OUT/sft.txt"
import os, time
import datasets
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained("/tmp/sft/tok")

def rule(batch):
    out = {"input_ids": [], "labels": []}
    for msgs in batch["messages"]:
        full = tok.apply_chat_template(msgs, tokenize=False)
        segs = []
        for i, m in enumerate(msgs):
            if m["role"] != "assistant":
                continue
            pre = tok.apply_chat_template(msgs[:i], tokenize=False, add_generation_prompt=True) if i else ""
            segs.append((len(pre), len(tok.apply_chat_template(msgs[:i + 1], tokenize=False))))
        enc = tok(full, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"]
        out["input_ids"].append(ids)
        out["labels"].append([t if any(a <= s < b for a, b in segs) else -100 for t, (s, _) in zip(ids, enc["offset_mapping"])])
    return out

ds = datasets.load_dataset("json", data_files="/tmp/sft/chat.jsonl", split="train")
t0 = time.time()
res = ds.map(rule, batched=True, num_proc=int(os.environ.get("WORKERS", "16")), remove_columns=ds.column_names)
hf = time.time() - t0
print(f"datasets.map(apply_chat_template + labels, num_proc={os.environ.get('WORKERS', '16')}): {hf:.2f} s")
chat = float(open("/tmp/sft/chat_seconds").read())
print(f"gload chat is {hf / chat:.1f}x faster than datasets.map (goal >= 20x)")
g = datasets.load_from_disk("/tmp/sft/ds_chat")
same = g["labels"] == res["labels"] and g["input_ids"] == res["input_ids"]
print(f"gload labels and input_ids == datasets.map's on all {len(res)} rows:", same)
PY
