"""Generate the pre-tokenizer goldens from Hugging Face tokenizers 0.23.2 (run from tokenize/pretok with the
tokenizers==0.23.2 venv:  python testdata/gen_golden.py).

Writes
  testdata/golden.json.gz   every config below on the edge-case inputs below: the words, in full;
                            plus the configs tokenizers refuses to load.
  testdata/fixtures.json.gz the fixture configs on the 833 texts of ../shared/fixtures/parity/texts.jsonl.gz, and
                            the code point configs on every code point (code_point_texts): one hash of the word
                            list per text (see word_hash).

Words of a pipeline that ends with ByteLevel are given as raw UTF-8 (the GPT-2 byte alphabet mapped back), which
is how package pretok hands them out (Info.ByteLevel).
"""
import gzip
import hashlib
import json
import os
import struct

import tokenizers
from tokenizers import Tokenizer

assert tokenizers.__version__ == "0.23.2", tokenizers.__version__

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "..", "..", "shared", "fixtures")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


BYTE_OF = bytes_to_unicode()


def load(pretok):
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": pretok, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
    }
    return Tokenizer.from_str(json.dumps(doc)).pre_tokenizer


def flat(pretok):
    if pretok["type"] == "Sequence":
        return [q for p in pretok["pretokenizers"] for q in flat(p)]
    return [pretok]


def words(pretok, ptok, text):
    ws = [w for w, _ in ptok.pre_tokenize_str(text)]
    steps = flat(pretok)
    if steps and steps[-1]["type"] == "ByteLevel":
        ws = [bytes(BYTE_OF[c] for c in w).decode("utf-8") for w in ws]
    return ws


def word_hash(ws):
    h = hashlib.sha256()
    for w in ws:
        b = w.encode("utf-8", "surrogatepass")
        h.update(struct.pack("<I", len(b)))
        h.update(b)
    return h.hexdigest()[:16]


def bl(prefix, trim=True, regex=True):
    d = {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": trim}
    if regex is not None:
        d["use_regex"] = regex
    return d


def split(pattern, behavior="Isolated", invert=False, string=False):
    return {"type": "Split", "pattern": {"String" if string else "Regex": pattern}, "behavior": behavior,
            "invert": invert}


def fixture_pretok(name):
    with gzip.open(os.path.join(FIXTURES, "tokenizers", name, "tokenizer.json.gz"), "rt") as f:
        return json.load(f)["pre_tokenizer"]


GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
CL100K = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = CL100K.replace(r"\p{N}{1,3}", r"\p{N}")
O200K = fixture_pretok("gpt4o")["pretokenizers"][0]["pattern"]["Regex"]
assert fixture_pretok("llama3")["pretokenizers"][0]["pattern"]["Regex"] == CL100K
assert fixture_pretok("qwen3")["pretokenizers"][0]["pattern"]["Regex"] == QWEN2

BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]

GENERAL = {
    "ws": r"\s+",
    "num": r"\p{N}+",
    "xstar": r"x*",
    "empty": r"",
    "lookahead_alt": r"a|(?=c)",
    "icase": r"(?i)[a-z]+",
    "words": r"\w+|[^\w\s]+",
    "bloom": r" ?[^(\s|[.,!?…。，、।۔،])]+",
    "deepseek_latin": r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-Ֆ]+",
    "deepseek_cjk": r"[一-龥ࠀ-一가-퟿]+",
    "trailing_ws": r"\s+$",
    "line": r"^.+$",
    "dotall": r"(?m)a.+?b",
    "hex": r"\d+|\h+",
    "wordstart": r"\b\w",
    "notword": r"\B.",
    "letters_marks": r"[\p{L}\p{M}]+",
    "nonletters": r"\P{L}+",
    "punct_sym": r"[^\p{L}\p{N}\s]+",
    "lookbehind": r"(?<=a)b",
    "upto2": r"a{,2}",
    "scripts": r"\p{Han}+|\p{Hiragana}+|\p{Katakana}+",
    "icase_upper": r"(?i)\p{Lu}+",
    "any": r".",
    "long_names": r"\p{Letter}+|\p{Decimal_Number}",
    "newlines": r"[\r\n]+",
    "digits3": r"\p{N}{1,3}",
}

STRINGS = {"a": "a", "space": " ", "ab": "ab", "meta": "▁", "dot": ".", "empty": "", "two_spaces": "  "}

CONFIGS = {}
CONFIGS["bytelevel"] = bl(True)
CONFIGS["bytelevel_noprefix"] = bl(False)
CONFIGS["bytelevel_prefix_noregex"] = bl(True, regex=False)
CONFIGS["bytelevel_identity"] = bl(False, False, False)
CONFIGS["bytelevel_default_regex"] = bl(False, False, None)
for name, pat in [("gpt2", GPT2), ("cl100k", CL100K), ("qwen2", QWEN2), ("o200k", O200K)]:
    CONFIGS["split_%s_isolated" % name] = split(pat)
    CONFIGS["split_%s_removed_invert" % name] = split(pat, "Removed", True)
    CONFIGS["split_%s_mergedprev_invert" % name] = split(pat, "MergedWithPrevious", True)
for name, pat in GENERAL.items():
    for beh in BEHAVIORS:
        for inv in (False, True):
            CONFIGS["regex_%s_%s_%s" % (name, beh, inv)] = split(pat, beh, inv)
for name, pat in STRINGS.items():
    for beh in BEHAVIORS:
        CONFIGS["string_%s_%s" % (name, beh)] = split(pat, beh, False, string=True)
    CONFIGS["string_%s_Removed_invert" % name] = split(pat, "Removed", True, string=True)
CONFIGS["metaspace"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
CONFIGS["metaspace_first"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}
CONFIGS["metaspace_never"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}
CONFIGS["metaspace_nosplit"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": False}
CONFIGS["metaspace_first_nosplit"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                                      "split": False}
CONFIGS["metaspace_underscore"] = {"type": "Metaspace", "replacement": "_", "prepend_scheme": "always",
                                   "split": True}
CONFIGS["metaspace_legacy"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
CONFIGS["metaspace_legacy_never"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": False,
                                     "prepend_scheme": "never"}
CONFIGS["metaspace_str_rep"] = {"type": "Metaspace", "replacement": "▁", "str_rep": "▁", "add_prefix_space": True,
                                "prepend_scheme": "first"}
CONFIGS["whitespace"] = {"type": "Whitespace"}
CONFIGS["whitespace_split"] = {"type": "WhitespaceSplit"}
CONFIGS["bert"] = {"type": "BertPreTokenizer"}
CONFIGS["digits"] = {"type": "Digits", "individual_digits": False}
CONFIGS["digits_individual"] = {"type": "Digits", "individual_digits": True}
CONFIGS["punctuation"] = {"type": "Punctuation"}
for beh in BEHAVIORS:
    CONFIGS["punctuation_" + beh] = {"type": "Punctuation", "behavior": beh}
CONFIGS["delimiter_x"] = {"type": "CharDelimiterSplit", "delimiter": "x"}
CONFIGS["delimiter_space"] = {"type": "CharDelimiterSplit", "delimiter": " "}
CONFIGS["delimiter_meta"] = {"type": "CharDelimiterSplit", "delimiter": "▁"}
CONFIGS["unicode_scripts"] = {"type": "UnicodeScripts"}
CONFIGS["fixed"] = {"type": "FixedLength"}
CONFIGS["fixed_1"] = {"type": "FixedLength", "length": 1}
CONFIGS["fixed_3"] = {"type": "FixedLength", "length": 3}
for name in ["llama3", "qwen3", "gpt4o", "bert-base-uncased", "unigram-spm8k"]:
    CONFIGS["fixture_" + name] = fixture_pretok(name)
CONFIGS["seq_empty"] = {"type": "Sequence", "pretokenizers": []}
CONFIGS["seq_wssplit_metafirst"] = {"type": "Sequence", "pretokenizers": [
    CONFIGS["whitespace_split"], CONFIGS["metaspace_first"]]}
CONFIGS["seq_xstar_metafirst"] = {"type": "Sequence", "pretokenizers": [
    split("x*"), CONFIGS["metaspace_first"]]}
CONFIGS["seq_removea_metafirst"] = {"type": "Sequence", "pretokenizers": [
    split("a", "Removed", string=True), CONFIGS["metaspace_first"]]}
CONFIGS["seq_metafirst_twice"] = {"type": "Sequence", "pretokenizers": [
    CONFIGS["metaspace_first"], CONFIGS["metaspace_first"]]}
CONFIGS["seq_digits_bytelevel"] = {"type": "Sequence", "pretokenizers": [
    CONFIGS["digits_individual"], bl(True)]}
CONFIGS["seq_split_bytelevel_prefix"] = {"type": "Sequence", "pretokenizers": [
    split(CL100K), bl(True, regex=False)]}
CONFIGS["seq_punct_whitespace"] = {"type": "Sequence", "pretokenizers": [
    CONFIGS["punctuation"], CONFIGS["whitespace"]]}
CONFIGS["seq_nested"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Sequence", "pretokenizers": [CONFIGS["digits"]]},
    {"type": "Sequence", "pretokenizers": [CONFIGS["whitespace_split"], CONFIGS["metaspace_first"]]}]}
CONFIGS["seq_three"] = {"type": "Sequence", "pretokenizers": [
    CONFIGS["whitespace_split"], CONFIGS["punctuation"], CONFIGS["digits_individual"]]}
CONFIGS["seq_extra_field"] = {"type": "Sequence", "pretokenizers": [CONFIGS["whitespace"]], "unknown": 1}

# Configs tokenizers 0.23.2 refuses to load.
ERRORS = {
    "split_missing_invert": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated"},
    "split_missing_behavior": {"type": "Split", "pattern": {"Regex": "a"}, "invert": False},
    "split_bad_behavior": split("a", "Foo"),
    "split_lower_behavior": split("a", "isolated"),
    "split_two_patterns": {"type": "Split", "pattern": {"Regex": "a", "String": "a"}, "behavior": "Isolated",
                           "invert": False},
    "split_no_pattern_kind": {"type": "Split", "pattern": {}, "behavior": "Isolated", "invert": False},
    "split_dotall_s": split("(?s)a"),
    "split_unbalanced": split("(a"),
    "metaspace_prefix_false": {"type": "Metaspace", "replacement": "▁", "add_prefix_space": False},
    "metaspace_bad_scheme": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"},
    "metaspace_long_replacement": {"type": "Metaspace", "replacement": "ab"},
    "metaspace_no_replacement": {"type": "Metaspace"},
    "digits_missing": {"type": "Digits"},
    "delimiter_type": {"type": "Delimiter", "delimiter": "x"},
    "delimiter_long": {"type": "CharDelimiterSplit", "delimiter": "xy"},
    "bytelevel_missing_trim": {"type": "ByteLevel", "add_prefix_space": True},
    "bytelevel_missing_prefix": {"type": "ByteLevel", "trim_offsets": True},
    "unknown_type": {"type": "Foo"},
    "no_type": {"add_prefix_space": True},
    "sequence_missing": {"type": "Sequence"},
    "punctuation_bad": {"type": "Punctuation", "behavior": "Nope"},
    "bad_bool": {"type": "Digits", "individual_digits": "yes"},
}

INPUTS = [
    "", " ", "  ", "\n", "\r\n", " \n ", "\t\t x", "a", "x", "Hello world", "Hello  world", " Hello", "Hello ",
    "Hello   ", "hello\n\nworld", "hello \n\n world  \n", "a\r\nb\r\n\r\n c", "   \n\n   x", " " * 20 + "x",
    "I'm you're we've he'll she'd it's they'RE I'M DON'T 'S 'ſ 'K 'll'll 'x ''s 's'S'ſ '\n \' a'",
    "12345 1234567 x1y22z333 ٣٤٥ ²³ ⅧⅨ 𝟘𝟙 3.14 1,000,000 ①②",
    "Hello, world! (test) [a]... --- ¿Qué? «quote» —dash— 你好，世界。 ‘q’ “dq” a|b",
    "Ünïcödé naïve café ΑΒΓ αβγ Привет мир", "日本語のテキスト カタカナ ひらがな 漢字ー", "한국어 텍스트",
    "مرحبا بالعالم שלום हिन्दी ไทย", "emoji 😀👍🏽 🇫🇷 👨‍👩‍👧 ☃",
    "HelloWorld HTTPServer iPhone camelCase ALLCAPS Ǆǅǆ ǈ McDonald's DON'T don't O'NEIL",
    "e\u0301 a\u0300b \u0301x !\u0301 \u0301", "ʰʰa aʰ ªº",
    "func main() {\n\tfmt.Println(\"hi\")\n}\n", "x := y /* c */ // d\n", "a/b/c\n/\n//\n", "http://example.com/p?q=1&r=2",
    "a\u00a0b a\u3000b a\u2028b a \u00a0 b \u0085x x\u200by a\u180eb a\u202fb",
    "▁already ▁▁double", " leading", "trailing ", "a  b", "▁ ▁", "_x_ y",
    "\U00010D40\U00010D41 \u1C89\u1C8A \U000105C0\U000105C1 \u0897",
    "xxaxxbxxc abacab acbc xx", "aaaa aaa a", "the-final--countdown", "a.b..c...",
    "Tab\there\tand\vvertical\fform", "\x00nul\x01ctrl\x7f", "SS ss ß ẞ ſ K K",
]


# Configs checked on every code point.
CODE_POINT_CONFIGS = ["fixture_llama3", "fixture_qwen3", "fixture_gpt4o", "fixture_bert-base-uncased",
                      "fixture_unigram-spm8k", "split_gpt2_isolated", "bytelevel", "whitespace", "whitespace_split",
                      "digits_individual", "punctuation_Contiguous", "unicode_scripts", "metaspace_first"]


def code_point_texts():
    """Every code point but the surrogates, in blocks of 0x4000: once as is, once with "x1 " after each."""
    out = []
    for lo in range(0, 0x110000, 0x4000):
        cps = [chr(c) for c in range(lo, lo + 0x4000) if not (0xD800 <= c <= 0xDFFF)]
        out.append("".join(cps))
        out.append("".join(c + "x1 " for c in cps))
    return out


def main():
    inputs = INPUTS
    golden = {"tokenizers": tokenizers.__version__, "inputs": inputs, "cases": [], "errors": []}
    for name, cfg in CONFIGS.items():
        ptok = load(cfg)
        golden["cases"].append({"name": name, "pretok": cfg, "words": [words(cfg, ptok, t) for t in inputs]})
    for name, cfg in ERRORS.items():
        try:
            load(cfg)
        except Exception as e:  # tokenizers raises a plain Exception
            golden["errors"].append({"name": name, "pretok": cfg, "hf_error": str(e)})
            continue
        raise SystemExit("tokenizers accepted error case %s" % name)
    with gzip.open(os.path.join(HERE, "golden.json.gz"), "wt", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=0)

    texts = []
    with gzip.open(os.path.join(FIXTURES, "parity", "texts.jsonl.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            texts.append(json.loads(line)["text"])
    fixture_configs = [n for n in CONFIGS if n.startswith(("fixture_", "bytelevel", "split_", "whitespace", "bert",
                                                           "digits", "punctuation", "metaspace"))]
    fixture_configs += ["regex_words_Isolated_False", "regex_bloom_Removed_True", "regex_deepseek_latin_Isolated_False",
                        "regex_deepseek_cjk_MergedWithNext_False", "regex_scripts_Contiguous_True",
                        "seq_three", "seq_split_bytelevel_prefix", "unicode_scripts"]
    fx = {"tokenizers": tokenizers.__version__, "texts": len(texts), "hash": "sha256 over (u32le len, utf-8 bytes) "
          "per word, first 16 hex digits", "cases": []}
    for name in fixture_configs:
        cfg = CONFIGS[name]
        ptok = load(cfg)
        fx["cases"].append({"name": name, "pretok": cfg, "hashes": [word_hash(words(cfg, ptok, t)) for t in texts]})
    cp_texts = code_point_texts()
    fx["code_point_texts"] = len(cp_texts)
    fx["code_point_cases"] = []
    for name in CODE_POINT_CONFIGS:
        cfg = CONFIGS[name]
        ptok = load(cfg)
        fx["code_point_cases"].append({"name": name, "pretok": cfg,
                                       "hashes": [word_hash(words(cfg, ptok, t)) for t in cp_texts]})
    with gzip.open(os.path.join(HERE, "fixtures.json.gz"), "wt", encoding="utf-8") as f:
        json.dump(fx, f, ensure_ascii=False)
    print("configs %d, errors %d, fixture configs %d" % (len(CONFIGS), len(ERRORS), len(fixture_configs)))


if __name__ == "__main__":
    main()
