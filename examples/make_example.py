#!/usr/bin/env python3
"""Regenerates examples/udhr: a small corpus and a small tokenizer that gload's quick start uses.

Corpus: the Universal Declaration of Human Rights texts of ../shared/fixtures/parity/texts.jsonl.gz (the UN allows
free reproduction of the UDHR). Tokenizer: a 4096-token byte-level BPE with the Llama-3 split regex, trained here on
that corpus with Hugging Face `tokenizers` (so its licence is ours to give: MIT, like the project).

    python3 examples/make_example.py    # needs: pip install tokenizers==0.23.2
"""
import gzip
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

here = os.path.dirname(os.path.abspath(__file__))
shared = os.path.join(here, "..", "..", "shared", "fixtures", "parity", "texts.jsonl.gz")
out = os.path.join(here, "udhr")
os.makedirs(out, exist_ok=True)

docs = []
with gzip.open(shared, "rt", encoding="utf-8") as f:
    for line in f:
        d = json.loads(line)
        if d["src"].startswith("udhr/"):
            docs.append({"text": d["text"], "src": d["src"]})

with gzip.GzipFile(os.path.join(out, "corpus.jsonl.gz"), "wb", mtime=0) as f:
    for d in docs:
        f.write((json.dumps(d, ensure_ascii=False) + "\n").encode("utf-8"))

llama3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(llama3), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
])
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=4096, special_tokens=["<|bos|>", "<|eos|>", "<|pad|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train_from_iterator((d["text"] for d in docs), trainer=trainer)
tok.post_processor = processors.TemplateProcessing(single="<|bos|> $A", special_tokens=[("<|bos|>", 0)])
tok.save(os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
    json.dump({"bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>"}, f, indent=1)
    f.write("\n")
print(f"{len(docs)} documents, vocab {tok.get_vocab_size()}")
