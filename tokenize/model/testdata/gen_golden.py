#!/usr/bin/env python3
"""Regenerates the golden files of package tokenize/model from Hugging Face tokenizers (0.23.2).

Run from the repository root with the project venv:

    .venv/bin/python tokenize/model/testdata/gen_golden.py

Outputs (all beside this script):
  golden_tiny.json.gz        hand-made and random small models, words and the ids of model.tokenize
  golden_words_<name>.jsonl.gz
                             a deterministic sample of the words that the fixture tokenizer's own normalizer and
                             pre-tokenizer cut from the fixture texts, as the model sees them (raw UTF-8 for the
                             byte-level models), with the ids of model.tokenize
  golden_llama2_docs.jsonl.gz
                             per fixture text: number of ids and sha256 of the ids (little-endian uint32) of the
                             llama2 model on "\u2581" + text.replace(" ", "\u2581") (nothing for an empty text) — each document is
                             one word
  golden_unigram_scores.json sha256 of the float64 scores (little-endian bits) as HF holds them in memory
  golden_serde_floats.json   number texts and the float64 bits serde_json (as built into HF) reads from them
"""
import gzip
import hashlib
import io
import json
import os
import random
import struct

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "..", "..", "..", "shared", "fixtures")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def to_bl(word):
    return "".join(B2U[b] for b in word.encode("utf-8"))


def from_bl(mapped):
    return bytes(U2B[c] for c in mapped).decode("utf-8")


def wrap(model):
    return json.dumps({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                       "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
                       "model": model})


def run_case(name, model, words, byte_level=False):
    case = {"name": name, "model": model, "byte_level": byte_level, "load_error": None, "words": []}
    try:
        tok = Tokenizer.from_str(wrap(model))
    except Exception as e:  # HF refuses the file: gload must too
        case["load_error"] = str(e)
        return case
    for w in words:
        try:
            ids = [t.id for t in tok.model.tokenize(to_bl(w) if byte_level else w)]
            case["words"].append({"w": w, "ids": ids})
        except Exception as e:
            case["words"].append({"w": w, "ids": None, "err": str(e)})
    return case


def tiny_cases():
    cases = []
    v = {"<unk>": 0, "a": 1, "b": 2, "c": 3, "ab": 4, "bc": 5, "abc": 6, "aa": 7, "aaa": 8, "aaaa": 9}
    words = ["a", "ab", "abc", "abcx", "xabc", "xyabzz", "aaaa", "aaa", "aaaaa", "aaaaaaa", "cba", "x", "xy",
             "éa", "a\u00e9\u00e9b", "abababab", "ab" * 40, "a" * 61, "abc" * 30 + "xx" + "ab" * 20]
    base = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": v,
            "merges": ["a b", "b c", "a bc", "a a", "aa a", "aa aa"]}
    cases.append(run_case("bpe_basic", base, words))
    cases.append(run_case("bpe_fuse_unk", dict(base, fuse_unk=True), words))
    cases.append(run_case("bpe_tuple_merges", dict(base, merges=[["a", "b"], ["b", "c"], ["a", "bc"], ["a", "a"],
                                                                 ["aa", "a"], ["aa", "aa"]]), words))
    cases.append(run_case("bpe_no_unk", dict(base, unk_token=None), words))
    cases.append(run_case("bpe_dropout_zero", dict(base, dropout=0.0), words))
    cases.append(run_case("bpe_rank_order", dict(base, merges=["aa aa", "a a", "aa a", "b c", "a b", "a bc"]), words))
    cases.append(run_case("bpe_dup_pair_last_wins", dict(base, merges=["a a", "a b", "b c", "a a", "a bc", "aa a"]),
                          words))
    cases.append(run_case("bpe_same_result_two_pairs", dict(base, merges=["b c", "a b", "ab c", "a bc", "a a", "aa a"],
                                                            vocab=dict(v)), words))
    cases.append(run_case("bpe_ignore_merges", dict(base, ignore_merges=True,
                                                     merges=["a b", "b c"], vocab=dict(v, abcx=10)), words))
    cases.append(run_case("bpe_version_line", dict(base, merges=["#version: 0.2", "a b", "b c"]), words))
    # continuing_subword_prefix / end_of_word_suffix
    va = {"<unk>": 0, "a": 1, "##a": 2, "b": 3, "##b": 4, "c</w>": 5, "##c</w>": 6, "ab": 7, "##bc</w>": 8,
          "abc</w>": 9, "a</w>": 10, "##a</w>": 11, "b</w>": 12, "##b</w>": 13, "c": 14, "##c": 15,
          "aa": 16, "##aa</w>": 17}
    aff = dict(base, vocab=va, continuing_subword_prefix="##", end_of_word_suffix="</w>",
               merges=["a ##b", "##b ##c</w>", "a ##bc</w>", "##a ##a</w>", "a ##a"])
    cases.append(run_case("bpe_affixes", aff, ["a", "ab", "abc", "c", "ba", "aa", "aaa", "abx", "xab", "cc", "abab",
                                                "é"]))
    cases.append(run_case("bpe_affixes_fuse", dict(aff, fuse_unk=True), ["axxb", "xxx", "axyc"]))
    affb = dict(aff, byte_fallback=True, vocab=dict(va, **{"<0x%02X>" % b: 100 + b for b in b"#</w>xyz"}))
    cases.append(run_case("bpe_affixes_byte_fallback", affb, ["x", "ax", "xa", "axb", "xyz", "é", "aé", "ééa"]))
    # byte_fallback, with partial coverage to pin Hugging Face's ordering of a pending unk
    vb = {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "<0x78>": 4, "<0xC3>": 5, "<0xA9>": 6, "<0x79>": 7, "<0xE2>": 8,
          "<0x82>": 9, "<0xAC>": 10, "<0x78><0x79>": 11}
    bf = dict(base, vocab=vb, byte_fallback=True, merges=["a b", "<0x78> <0x79>"])
    bw = ["ab", "x", "xy", "abé", "é", "€", "zx", "zzx", "zxz", "z", "qéz", "xyxy", "🙂a", "aqqb"]
    cases.append(run_case("bpe_byte_fallback", bf, bw))
    cases.append(run_case("bpe_byte_fallback_fuse", dict(bf, fuse_unk=True), bw))
    cases.append(run_case("bpe_byte_fallback_no_unk", dict(bf, unk_token=None), bw))
    full = dict(vb)
    for b in range(256):
        full.setdefault("<0x%02X>" % b, 100 + b)
    cases.append(run_case("bpe_byte_fallback_full", dict(bf, vocab=full, fuse_unk=True), bw + ["\x00\x7f", "ü€😀"]))
    # byte-level vocabulary (GPT-2 alphabet); words are raw text
    blv = {}
    for b in range(256):
        blv[B2U[b]] = len(blv)
    merges = []
    for a, b in [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"i", b"n"), (b"in", b"g"), (b" ", b" "),
                 (b"  ", b"  "), (b"\xc3", b"\xa9"), (b"\n", b"\n"), (b"\xc3\xa9", b"t"), (b"t", b"\xc3")]:
        ma, mb = "".join(B2U[x] for x in a), "".join(B2U[x] for x in b)
        merges.append(ma + " " + mb)
        blv.setdefault(ma + mb, len(blv))
    bl = dict(base, vocab=blv, merges=merges, unk_token=None)
    blw = [" the", " thing", "thé", "été", "    ", "\n\n\n", " ", "x", "é", "日本語", "a b", "ing", " in g", "\t\x00",
           "🙂🙂"]
    cases.append(run_case("bpe_byte_level", bl, blw, byte_level=True))
    cases.append(run_case("bpe_byte_level_ignore_merges", dict(bl, ignore_merges=True), blw + [" t"],
                          byte_level=True))
    # load errors Hugging Face reports
    cases.append(run_case("bpe_err_merge_missing", dict(base, merges=["a x"]), []))
    cases.append(run_case("bpe_err_merge_result_missing", dict(base, merges=["c c"]), []))
    cases.append(run_case("bpe_err_bad_legacy_merge", dict(base, merges=["a b c"]), []))
    cases.append(run_case("bpe_err_no_merges", {k: x for k, x in base.items() if k != "merges"}, []))
    cases.append(run_case("bpe_err_wrong_type", dict(base, type="BPEx"), []))
    # WordPiece / WordLevel
    wv = {"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3, "a": 4, "##a": 5, "aff": 6, "able": 7, "é": 8, "##é": 9,
          "unaffable": 10, "##b": 11}
    wp = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
          "max_input_chars_per_word": 100, "vocab": wv}
    ww = ["unaffable", "unaff", "affable", "aaa", "ab", "abc", "x", "éé", "aé", "unaffablea", "a" * 150, "a" * 100,
          "ba"]
    cases.append(run_case("wordpiece", wp, ww))
    cases.append(run_case("wordpiece_short_max", dict(wp, max_input_chars_per_word=5), ww))
    cases.append(run_case("wordpiece_other_prefix", dict(wp, continuing_subword_prefix="@@",
                                                         vocab={"[UNK]": 0, "a": 1, "@@b": 2, "@@bb": 3, "b": 4}),
                          ["ab", "abbb", "abb", "ba", "bab"]))
    cases.append(run_case("wordpiece_untyped", {k: x for k, x in wp.items() if k != "type"}, ww))
    cases.append(run_case("wordpiece_err_missing_prefix",
                          {k: x for k, x in wp.items() if k != "continuing_subword_prefix"}, []))
    wl = {"type": "WordLevel", "unk_token": "<unk>", "vocab": {"<unk>": 0, "hello": 1, "world": 2, "é": 3}}
    cases.append(run_case("wordlevel", wl, ["hello", "world", "x", "é", "Hello"]))
    cases.append(run_case("wordlevel_byte_level", dict(wl, vocab={"<unk>": 0, "Ġhello": 1, to_bl("é"): 2}),
                          [" hello", "hello", "é"], byte_level=True))
    # Unigram
    uv = [["<unk>", 0.0], ["a", -1.0], ["b", -2.0], ["c", -2.5], ["ab", -2.5], ["abc", -4.0], ["bc", -3.0],
          ["\u2581", -1.5], ["\u2581a", -2.0], ["é", -3.0], ["<0x41>", -5.0]]
    un = {"type": "Unigram", "unk_id": 0, "vocab": uv, "byte_fallback": False}
    uw = ["abc", "ab", "abcabc", "xyz", "axbyc", "\u2581abc", "é", "éx", "<unk>", "a<unk>b", "x<unk>", "ABC",
          "\u2581", "cba", "bcab"]
    cases.append(run_case("unigram", un, uw))
    cases.append(run_case("unigram_byte_fallback", dict(un, byte_fallback=True,
                                                         vocab=uv + [["<0x%02X>" % b, -6.0] for b in range(256)
                                                                     if b != 0x41]), uw))
    cases.append(run_case("unigram_byte_fallback_partial", dict(un, byte_fallback=True), uw + ["A", "AA"]))
    cases.append(run_case("unigram_ties", dict(un, vocab=[["<unk>", 0], ["a", -1], ["b", -1], ["ab", -2], ["abab", -4],
                                                           ["ba", -2], ["aba", -3], ["bab", -3]]),
                          ["ab", "aba", "abab", "ababab", "babab", "ba"]))
    cases.append(run_case("unigram_dup_pieces", dict(un, vocab=[["<unk>", 0], ["a", -1], ["b", -2], ["a", -3],
                                                                 ["ab", -1.5], ["<unk>", -1]]),
                          ["a", "ab", "ba", "x", "<unk>", "x<unk>"]))
    cases.append(run_case("unigram_unk_not_first", dict(un, unk_id=2, vocab=[["a", -1], ["b", -2], ["<unk>", 0]]),
                          ["ab", "xa", "xx"]))
    cases.append(run_case("unigram_untyped", {k: x for k, x in un.items() if k != "type"}, uw))
    cases.append(run_case("unigram_err_unk_range", dict(un, unk_id=99), []))
    cases.append(run_case("unigram_int_scores", dict(un, vocab=[["<unk>", 0], ["a", -1], ["b", -2], ["ab", -3]]),
                          ["ab", "ba", "abx"]))
    return cases


def random_bpe(rng, idx):
    alpha = list("abcd") + ["é"]
    vocab = {"<unk>": 0}
    for ch in alpha:
        vocab[ch] = len(vocab)
    toks = list(alpha)
    merges = []
    for _ in range(rng.randint(5, 60)):
        a, b = rng.choice(toks), rng.choice(toks)
        if len(a + b) > 8:
            continue
        merges.append([a, b])
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
            toks.append(a + b)
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": rng.random() < 0.5, "byte_fallback": False, "vocab": vocab,
             "merges": merges}
    words = []
    for _ in range(60):
        n = rng.choice([1, 2, 3, 5, 8, 20, 47, 48, 49, 60, 150])
        words.append("".join(rng.choice(alpha + ["x"]) for _ in range(n)))
    return run_case("bpe_random_%d" % idx, model, words)


def random_unigram(rng, idx):
    alpha = list("abc") + ["é"]
    pieces = {}
    for _ in range(rng.randint(5, 40)):
        p = "".join(rng.choice(alpha) for _ in range(rng.randint(1, 4)))
        pieces[p] = rng.choice([-1.0, -2.0, -3.0, -1.5, round(-rng.random() * 8, 6)])
    vocab = [["<unk>", 0.0]] + [[p, s] for p, s in pieces.items()]
    model = {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": False}
    words = []
    for _ in range(60):
        n = rng.choice([1, 2, 3, 5, 8, 20, 60])
        words.append("".join(rng.choice(alpha + ["x"]) for _ in range(n)))
    return run_case("unigram_random_%d" % idx, model, words)


def gz_text(path):
    """A gzip text writer with a fixed header time, so regenerated files are byte-identical."""
    return io.TextIOWrapper(gzip.GzipFile(path, "wb", mtime=0), encoding="utf-8")


def random_chunk_bpe(rng, idx):
    """Models where "\u2581" qualifies as a split character (it only starts tokens) and long words, so that
    gload's chunking of long words (encodeSplit, encodeLong) is checked against HF's whole-word heap. From
    idx 9 on there is no unk token, so unknown characters vanish (and the split character must not be used)."""
    X = "\u2581"
    alpha = [X, "a", "b", "c", "\u00e9", "\u65e5", "\u672c"]
    vocab = {"<unk>": 0}
    for ch in alpha:
        vocab[ch] = len(vocab)
    fallback = idx % 3 == 0
    if fallback:
        for b in range(256):
            if b not in (0x78,):  # "x" stays unknown even with byte fallback
                vocab["<0x%02X>" % b] = len(vocab)
    toks = list(alpha)
    merges = []
    for _ in range(rng.randint(20, 120)):
        a, b = rng.choice(toks), rng.choice(toks)
        m = a + b
        if len(m) > 8 or X in m.lstrip(X):
            continue
        merges.append([a, b])
        if m not in vocab:
            vocab[m] = len(vocab)
            toks.append(m)
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>" if idx < 9 else None,
             "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": idx % 2 == 0,
             "byte_fallback": fallback, "vocab": vocab, "merges": merges}
    words = []
    weights = [4, 3, 3, 3, 1, 1, 1]
    for _ in range(25):
        n = rng.choice([30, 200, 300, 700, 1500])
        words.append("".join(rng.choices(alpha + ["x", "\U0001F600"], weights + [1, 1], k=n)))
    return run_case("bpe_chunk_random_%d" % idx, model, words)


SERDE_NUMBERS = ["0", "-0", "1", "-1", "0.1", "-0.1", "-3.1027262210845947", "-3.7751879692077637", "1e2", "1E2",
                 "1e-2", "-12.5e-3", "0.30000000000000004", "5e-324", "2.2250738585072014e-308",
                 "1.7976931348623157e308", "1e-400", "-1e-400", "18446744073709551615", "18446744073709551616",
                 "-18446744073709551616", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                 "184467440737095516150.5", "1.8446744073709551616", "0.000000000000000000000000000001234567891234",
                 "123456789012345678901234567890", "1844674407370955161.0", "1844674407370955161.7",
                 "1234567890123456789.123456789", "-7.0000000000000001", "9007199254740993", "9007199254740993.0",
                 "4.9406564584124654e-324", "1e308", "0.1e309", "100e-310", "1e-320", "-8.17253589630127",
                 "-10.000000000000002", "3.141592653589793238462643383279", "1e+3", "1.5e000000000000000002"]


def serde_floats():
    vocab = [["<unk>", 0]] + [["p%d" % i, 0] for i in range(len(SERDE_NUMBERS))]
    body = json.dumps({"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": False})
    # splice the literal number texts in, so HF parses exactly these strings
    for i, num in enumerate(SERDE_NUMBERS):
        body = body.replace('["p%d", 0]' % i, '["p%d", %s]' % (i, num), 1)
    tok = Tokenizer.from_str(wrap_raw(body))
    got = json.loads(tok.to_str())["model"]["vocab"][1:]
    out = []
    for num, (_, val) in zip(SERDE_NUMBERS, got):
        out.append({"text": num, "bits": "%016x" % struct.unpack("<Q", struct.pack("<d", float(val)))[0]})
    with open(os.path.join(HERE, "golden_serde_floats.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def wrap_raw(model_json):
    head = wrap(None)
    return head.replace('"model": null', '"model": ' + model_json)


def load_fixture(name):
    with gzip.open(os.path.join(FIX, "tokenizers", name, "tokenizer.json.gz")) as f:
        return Tokenizer.from_str(f.read().decode("utf-8"))


def fixture_texts():
    with gzip.open(os.path.join(FIX, "parity", "texts.jsonl.gz"), "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def fixture_words(name, texts, byte_level, rng, sample=12000):
    tok = load_fixture(name)
    words = set()
    for text in texts:
        n = tok.normalizer.normalize_str(text) if tok.normalizer else text
        for w, _ in tok.pre_tokenizer.pre_tokenize_str(n):
            words.add(w)
    words = sorted(words)
    longest = sorted(words, key=lambda w: (-len(w), w))[:300]
    nonascii = [w for w in words if any(ord(c) > 127 for c in (from_bl(w) if byte_level else w))]
    pick = set(longest)
    pick.update(rng.sample(nonascii, min(len(nonascii), sample // 4)))
    pick.update(rng.sample(words, min(len(words), sample)))
    out = []
    for w in sorted(pick):
        ids = [t.id for t in tok.model.tokenize(w)]
        out.append({"w": from_bl(w) if byte_level else w, "ids": ids})
    path = os.path.join(HERE, "golden_words_%s.jsonl.gz" % name)
    with gz_text(path) as f:
        for rec in out:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def llama2_docs(texts):
    tok = load_fixture("llama2")
    path = os.path.join(HERE, "golden_llama2_docs.jsonl.gz")
    with gz_text(path) as f:
        for i, text in enumerate(texts):
            norm = tok.normalizer.normalize_str(text)
            assert norm == ("\u2581" + text.replace(" ", "\u2581") if text else "")
            ids = [t.id for t in tok.model.tokenize(norm)] if norm else []
            h = hashlib.sha256(struct.pack("<%dI" % len(ids), *ids)).hexdigest()
            f.write(json.dumps({"doc": i, "n": len(ids), "sha256": h}) + "\n")


def unigram_scores():
    tok = load_fixture("unigram-spm8k")
    vocab = json.loads(tok.to_str())["model"]["vocab"]
    blob = b"".join(struct.pack("<d", float(s)) for _, s in vocab)
    with open(os.path.join(HERE, "golden_unigram_scores.json"), "w") as f:
        json.dump({"fixture": "unigram-spm8k", "n": len(vocab), "sha256": hashlib.sha256(blob).hexdigest()}, f)
        f.write("\n")


def main():
    rng = random.Random(20240601)
    cases = tiny_cases()
    cases += [random_bpe(rng, i) for i in range(12)]
    cases += [random_unigram(rng, i) for i in range(12)]
    cases += [random_chunk_bpe(rng, i) for i in range(12)]
    with gz_text(os.path.join(HERE, "golden_tiny.json.gz")) as f:
        json.dump({"tokenizers": "0.23.2", "cases": cases}, f, ensure_ascii=False, indent=0)
    texts = fixture_texts()
    for name, bl in [("llama3", True), ("qwen3", True), ("gpt4o", True), ("unigram-spm8k", False),
                     ("bert-base-uncased", False)]:
        fixture_words(name, texts, bl, random.Random(name))
    llama2_docs(texts)
    unigram_scores()
    serde_floats()


if __name__ == "__main__":
    main()
