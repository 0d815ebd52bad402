#!/usr/bin/env python3
"""Generate the normalizer goldens of package normalize from Hugging Face tokenizers (Python, Rust core).

Run from tokenize/normalize:  ../../.venv/bin/python testdata/gen_golden.py

Outputs (gzip, deterministic):
  testdata/cases.json.gz       hand-made edge cases: normalizer JSON, input, expected output (in full)
  testdata/hashes.json.gz      hashes of outputs, so that large inputs need not be committed:
                                 "codepoints": every code point alone, hashed per block of 4096 code points
                                 "probes":     every BMP code point after/before probe strings, per block
                                 "fixtures":   each of the 833 fixture texts (../../shared/fixtures/parity)
                                 "random":     random strings of marks, jamo, composites and starters (inputs kept)
Each normalizer is built from its tokenizer.json form through Tokenizer.from_str, as the Go side builds it.
"""
import gzip
import hashlib
import io
import json
import os
import random

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "..", "..", "shared", "fixtures")


def build(norm):
    j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": norm,
         "pre_tokenizer": None, "post_processor": None, "decoder": None,
         "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}
    return Tokenizer.from_str(json.dumps(j)).normalizer


def unigram_normalizer():
    with gzip.open(os.path.join(FIXTURES, "tokenizers", "unigram-spm8k", "tokenizer.json.gz"), "rt") as f:
        return json.load(f)["normalizer"]


def bert(clean, chinese, strip, lower):
    return {"type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese, "strip_accents": strip,
            "lowercase": lower}


UNIGRAM = unigram_normalizer()
PRECOMPILED = UNIGRAM["normalizers"][0]
# Stand-ins written to the goldens instead of the 200 kB charsmap; the Go test reads the fixture for them.
REFS = {"Unigram": {"$fixture": "unigram-spm8k"}, "Precompiled": {"$fixture": "unigram-spm8k", "$index": 0}}


def ref(norm):
    for name, r in REFS.items():
        if norm is NORMALIZERS.get(name) or (name == "Unigram" and norm is UNIGRAM):
            return r
    return norm

# Normalizers checked on every input set, by name (the Go test builds the same JSON).
NORMALIZERS = {
    "NFC": {"type": "NFC"},
    "NFD": {"type": "NFD"},
    "NFKC": {"type": "NFKC"},
    "NFKD": {"type": "NFKD"},
    "Lowercase": {"type": "Lowercase"},
    "StripAccents": {"type": "StripAccents"},
    "Nmt": {"type": "Nmt"},
    "Strip": {"type": "Strip", "strip_left": True, "strip_right": True},
    "ByteLevel": {"type": "ByteLevel"},
    "BertUncased": bert(True, True, None, True),
    "BertCased": bert(True, True, False, False),
    "BertAccents": bert(False, False, True, False),
    "Precompiled": PRECOMPILED,
    "Unigram": UNIGRAM,
    "Llama2": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                   {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
}

# Normalizers checked on the random strings.
RANDOM = ["NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "BertUncased", "BertAccents", "Precompiled"]

# Probe strings around every BMP code point X: whole-grapheme lookups of Precompiled (shorter than 6 bytes) and
# composition with neighbours.
PROBES = {
    "Precompiled": ["\u00a0{}", "{}\u00a0", "A{}", "\uff21{}", "{}\u0301", "\r{}", "{}\u200d", "\u0600{}",
                    "\u0915\u094d{}\u0301", "\u00a9\u200d{}\u0301", "{}\U0001f3fb"],
    "NFC": ["{}\u0301", "{}\u0316\u0301", "a{}", "\u1100{}"],
    "NFKC": ["{}\u0301", "{}\u0316\u0301"],
    "NFD": ["{}\u0301", "\u0301{}\u0316"],
    "BertUncased": ["{}\u0301", "A{}"],
}


def digest(h):
    return h.hexdigest()[:16]


def block_hashes(norm, fmt):
    out = []
    h = hashlib.sha256()
    limit = 0x10000 if fmt != "{}" else 0x110000
    for c in range(limit):
        if 0xD800 <= c <= 0xDFFF:
            s = ""
        else:
            s = norm.normalize_str(fmt.format(chr(c)))
        h.update(s.encode("utf-8") + b"\xff")
        if c % 4096 == 4095:
            out.append(digest(h))
            h = hashlib.sha256()
    return out


def random_strings(n, seed):
    rng = random.Random(seed)
    pool = [chr(c) for c in list(range(0x300, 0x370)) + [0x5B0, 0x5B9, 0x5C1, 0x5C2, 0x64B, 0x651, 0x93C, 0x94D,
                                                            0x9BC, 0x9BE, 0x9C7, 0x9D7, 0xB3E, 0xB47, 0xB56, 0xB57,
                                                            0xBBE, 0xBC6, 0xBD7, 0xCC2, 0xCC6, 0xCD5, 0xD3E, 0xD46,
                                                            0xDCA, 0xDCF, 0xDD9, 0xDDF, 0xF71, 0xF72, 0xF74, 0xF80,
                                                            0x102E, 0x1025, 0x1B05, 0x1B35, 0x302A, 0x302B, 0x3099,
                                                            0x309A, 0x1D165, 0x1D16D, 0x1D16E, 0x11100, 0x11127,
                                                            0x1DFA, 0x1AB0, 0x0897, 0x10EFD]]
    starters = list("aAeEiIoOuUnNcCsSzZyY ") + [chr(c) for c in [
        0x1100, 0x1112, 0x1161, 0x1175, 0x11A7, 0x11A8, 0x11C2, 0xAC00, 0xAC01, 0xD7A3, 0x3131, 0x00C5, 0x212B,
        0x00E9, 0x01D5, 0x1E9B, 0x0F73, 0x0344, 0x0958, 0x2126, 0xFB2C, 0xFB01, 0x1E0A, 0x0391, 0x03B1, 0x0399,
        0x0415, 0x0435, 0x0CBF, 0x0CC6, 0x304B, 0x30AB, 0x30FB, 0x3000, 0x00A0, 0x0130, 0x0049, 0x03A3, 0x1F88,
        0x4E00, 0x00DF, 0x1E9E, 0x2160, 0x24B6, 0xFF21, 0x1D400, 0x10400, 0x1E900, 0x0000, 0x0009, 0x000A, 0x000D,
        0x0085, 0x200B, 0x200D, 0xFEFF, 0xFFFD, 0x2581, 0x1F1E6, 0x1F1FA, 0x1F468, 0x1F3FB, 0x0600, 0x0915,
        0x093F, 0x0E33, 0x0EB3, 0x32FF, 0x11938, 0x11935, 0x11930, 0xA7F2, 0x1E030]]
    out = []
    for _ in range(n):
        k = rng.randint(1, 14)
        s = "".join(rng.choice(pool) if rng.random() < 0.45 else rng.choice(starters) for _ in range(k))
        out.append(s)
    # Long runs of non-starters (HF has no Stream-Safe limit) and runs longer than the insertion-sort threshold.
    for k in (20, 31, 40, 100):
        out.append("a" + "".join(rng.choice(pool) for _ in range(k)))
    return out


CASES = [
    # (normalizer JSON, [inputs])
    ({"type": "NFC"}, ["", "abc", "e\u0301", "\u1100\u1161\u11a8", "\uac00\u11a8", "a" + "\u0301" * 40,
                       "\u0958", "\u212b", "\u00c5\u0316", "\U00011935\U00011930", "\u32ff"]),
    ({"type": "NFKC"}, ["\ufb01", "\u2126", "\u32ff", "\u2160\u2161", "\uff21\uff42", "\u1e9b\u0323", "\u00bd"]),
    ({"type": "NFD"}, ["\u00e9", "\u1e9b\u0323", "\uac01", "q\u0307\u0323", "\u0344"]),
    ({"type": "NFKD"}, ["\u1e9b\u0323", "\ufb01", "\u00bd"]),
    ({"type": "Lowercase"}, ["ABC", "\u0130", "\u03a3\u03a3", "\u1e9e", "\u2c2f", "\U0001e900", "\u0049\u0307",
                             "\u1f88", "\u2126\u212a\u212b", "MiXeD \u00c0\u00c9"]),
    ({"type": "StripAccents"}, ["e\u0301", "\u00e9", "a\u0903b\u20ddc\u0488", "\u302a"]),
    ({"type": "Strip", "strip_left": True, "strip_right": True},
     ["", "   ", " a ", "\u3000a\u00a0", "\u200ba\u200b", "\t\n\r\x0b\x0ca\x85\u2028"]),
    ({"type": "Strip", "strip_left": True, "strip_right": False}, ["  a  ", "\u2029"]),
    ({"type": "Strip", "strip_left": False, "strip_right": True}, ["  a  ", "\u2029"]),
    ({"type": "Prepend", "prepend": "\u2581"}, ["", "a", " a"]),
    ({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, ["", "a b  c ", "none"]),
    ({"type": "Replace", "pattern": {"String": ""}, "content": "x"}, ["", "ab", "\u00e9\U0001f600"]),
    ({"type": "Replace", "pattern": {"String": "aa"}, "content": "b"}, ["aaa", "aaaa", "xaax"]),
    ({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}, ["a  b   c    d", " ", "  "]),
    ({"type": "Replace", "pattern": {"Regex": "b*"}, "content": "x"}, ["", "ab  c", "bbb", "abba"]),
    ({"type": "Replace", "pattern": {"Regex": "^a"}, "content": "x"}, ["a\na\r\na"]),
    ({"type": "Replace", "pattern": {"Regex": "a$"}, "content": "x"}, ["a\na\r\na"]),
    ({"type": "Replace", "pattern": {"Regex": "(?<=b)a"}, "content": "x"}, ["ba ba aa"]),
    ({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": "_"}, ["a \u3000\u00a0\u0085b\u200bc\t\n"]),
    ({"type": "Replace", "pattern": {"Regex": "\\w+"}, "content": "_"}, ["ab\u0903c de\u20dd f_1 \u0661"]),
    ({"type": "Replace", "pattern": {"Regex": "\\W+"}, "content": "_"}, ["ab\u0903c de\u20dd f_1 -- \u0661"]),
    ({"type": "Replace", "pattern": {"Regex": "[\\w-]+"}, "content": "_"}, ["ab\u0903c de\u20dd f-1 +"]),
    ({"type": "Replace", "pattern": {"Regex": "[]a]"}, "content": "_"}, ["]a["]),
    ({"type": "Replace", "pattern": {"Regex": "."}, "content": "_"}, ["a\nb\r"]),
    ({"type": "Replace", "pattern": {"Regex": "\\d"}, "content": "_"}, ["1\u0661\u00b2\u2155"]),
    ({"type": "Replace", "pattern": {"Regex": "\\p{P}"}, "content": ""}, ["a,b.c!\u3002"]),
    ({"type": "Nmt"}, ["a\x01b\x0bc\x0cd\u200be\u2581f\ufeff\ufffd\x7f\x8f\x9f\t\n\r", "plain"]),
    ({"type": "ByteLevel"}, ["", "hello world", "\u00e9\U0001f600\n"]),
    (bert(True, True, None, True), ["Hello, World!", "\x00a\ufffdb\u200bc\x7f\t\n", "\u4e2d\u6587abc",
                                    "Caf\u00e9 na\u00efve", "\u0130stanbul", "\u00c5\u0316", "\U00020000x"]),
    (bert(True, False, False, False), ["A\u4e2d\tB\u00e9"]),
    (bert(False, True, True, True), ["A\u4e2d\tB\u00e9"]),
    (bert(False, False, None, False), ["A\u4e2d\tB\u00e9"]),
    ({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
     ["\u00c9cole \u00c0 la Plage"]),
    ({"type": "Sequence", "normalizers": []}, ["unchanged"]),
    ({"type": "Sequence", "normalizers": [{"type": "Sequence", "normalizers": [{"type": "Lowercase"}]},
                                          {"type": "Strip", "strip_left": True, "strip_right": True}]}, [" A "]),
    (UNIGRAM, ["", "Hello  World", "\uff21\uff22\uff23", "\u00e9\u0301", "a\r\nb", "\u2460\u2461", "\ufb01",
               "\u1100\u1161", "\u00a0\u0301", "A\u0301", "\t\x01x", "\U0001f468\u200d\U0001f469"]),
]


def write_gz(name, obj):
    raw = json.dumps(obj, ensure_ascii=True, sort_keys=True, indent=0).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as g:
        g.write(raw)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(buf.getvalue())


def main():
    cases = []
    for norm, inputs in CASES:
        n = build(norm)
        cases.append({"normalizer": ref(norm), "io": [[s, n.normalize_str(s)] for s in inputs]})
    write_gz("cases.json.gz", cases)

    built = {name: build(j) for name, j in NORMALIZERS.items()}
    with gzip.open(os.path.join(FIXTURES, "parity", "texts.jsonl.gz"), "rt") as f:
        texts = [json.loads(line)["text"] for line in f]
    rnd = random_strings(3000, 20260601)

    hashes = {"normalizers": {name: ref(j) for name, j in NORMALIZERS.items()}, "codepoints": {}, "probes": {},
              "fixtures": {}, "random": {}, "random_inputs": rnd}
    for name, n in built.items():
        hashes["codepoints"][name] = block_hashes(n, "{}")
        hashes["fixtures"][name] = [digest(hashlib.sha256(n.normalize_str(t).encode()))[:12] for t in texts]
        if name in RANDOM:
            hashes["random"][name] = [digest(hashlib.sha256(n.normalize_str(t).encode()))[:8] for t in rnd]
    for name, fmts in PROBES.items():
        hashes["probes"][name] = {fmt: block_hashes(built[name], fmt) for fmt in fmts}
    write_gz("hashes.json.gz", hashes)


if __name__ == "__main__":
    main()
