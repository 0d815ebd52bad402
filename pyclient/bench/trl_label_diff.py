#!/usr/bin/env python3
"""Counts where the SFT labels gload writes (the reference rule of shared/fixtures/chat, which `gload tokenize
--format chat` matches token for token: pyclient/tests/test_sft.py) differ from TRL's DataCollatorForCompletionOnlyLM
over the same token ids, on the llama3-instruct references of shared/fixtures/chat.

    python3 pyclient/bench/trl_label_diff.py [--shared ../shared] [--pad eos|reserved]

TRL's collator is given the response template "<|start_header_id|>assistant<|end_header_id|>\\n\\n" and the
instruction template "<|start_header_id|>user<|end_header_id|>\\n\\n" (TRL's documented use for Llama-3), one record
per batch (no padding), and the tokenizer's pad token set to eos (<|eot_id|>, the common choice) or to a reserved
token. Prints one table row per cause.
"""
import argparse
import gzip
import json
import os
import tempfile
import warnings

RESPONSE = "<|start_header_id|>assistant<|end_header_id|>\n\n"
INSTRUCTION = "<|start_header_id|>user<|end_header_id|>\n\n"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
    p.add_argument("--pad", choices=["eos", "reserved"], default="eos")
    a = p.parse_args()
    from transformers import PreTrainedTokenizerFast
    from trl import DataCollatorForCompletionOnlyLM

    chat = os.path.join(a.shared, "fixtures", "chat")
    with tempfile.TemporaryDirectory() as d:
        with gzip.open(os.path.join(a.shared, "fixtures", "tokenizers", "llama3", "tokenizer.json.gz"), "rb") as f:
            open(os.path.join(d, "tokenizer.json"), "wb").write(f.read())
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"))
    tok.eos_token = "<|eot_id|>"
    tok.pad_token = "<|eot_id|>" if a.pad == "eos" else "<|reserved_special_token_0|>"
    coll = DataCollatorForCompletionOnlyLM(RESPONSE, instruction_template=INSTRUCTION, tokenizer=tok, mlm=False)
    with gzip.open(os.path.join(chat, "llama3-instruct.jsonl.gz"), "rt", encoding="utf-8") as f:
        next(f)
        refs = [json.loads(line) for line in f]
    eot = tok.convert_tokens_to_ids("<|eot_id|>")
    n = {"records": 0, "records_equal": 0, "tokens": 0, "gload_trained": 0, "trl_trained": 0,
         "eos_masked_by_trl": 0, "trl_found_no_response": 0, "tokens_lost_no_response": 0,
         "gload_only_other": 0, "trl_only": 0, "records_trl_only": 0}
    for r in refs:
        if "input_ids" not in r or not r["id"].startswith(("conv-", "pc-")):
            continue
        ids, want = r["input_ids"], r["labels"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = coll([{"input_ids": ids}])["labels"][0].tolist()
        n["records"] += 1
        n["tokens"] += len(ids)
        n["records_equal"] += got == want
        n["gload_trained"] += sum(x != -100 for x in want)
        n["trl_trained"] += sum(x != -100 for x in got)
        if all(x == -100 for x in got) and any(x != -100 for x in want):
            n["trl_found_no_response"] += 1
            n["tokens_lost_no_response"] += sum(x != -100 for x in want)
            continue
        only = 0
        for t, (w, g) in enumerate(zip(want, got)):
            if w != -100 and g == -100:
                if ids[t] == eot and a.pad == "eos":
                    n["eos_masked_by_trl"] += 1
                else:
                    n["gload_only_other"] += 1
            elif w == -100 and g != -100:
                n["trl_only"] += 1
                only += 1
        n["records_trl_only"] += only > 0
    print(json.dumps(dict(pad=a.pad, **n)))


if __name__ == "__main__":
    main()
