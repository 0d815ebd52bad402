#!/usr/bin/env python3
"""Generate testdata/cases.json for package decode from Hugging Face tokenizers (Python, Rust core).

Run from tokenize/decode:  ../../.venv/bin/python testdata/gen_golden.py

Each case is a decoder in its tokenizer.json form (built through Tokenizer.from_str, as the Go side builds it), a
list of tokens and what decoder.decode(tokens) returns: the joined output of the decoder chain.
"""
import json
import os

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))


def build(dec):
    j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
         "pre_tokenizer": None, "post_processor": None, "decoder": dec,
         "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}
    return Tokenizer.from_str(json.dumps(j)).decoder


def bl(s):
    """GPT-2 byte-level form of raw bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, map(chr, cs)))
    return "".join(table[b] for b in s)


BYTELEVEL = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
LLAMA2 = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}

CASES = [
    (BYTELEVEL, [
        [], [""], [bl(b"Hello"), bl(b" world"), bl(b"!")],
        [bl("héllo 世界 😀".encode())],
        [bl(b"\xe2\x82"), bl(b"\xac")],            # a character split over two tokens
        [bl(b"\xe2\x82")],                        # truncated: one U+FFFD (maximal subpart)
        [bl(b"\xf0\x9f\x98")],                    # truncated 4-byte sequence
        [bl(b"\xff\xfe a \x80\xbf")],             # bytes that never start a sequence
        [bl(b"\xed\xa0\x80")],                    # surrogate encoding: three U+FFFD
        [bl(b"\xe0\x80\x80 \xf4\x90\x80\x80 \xc0\xaf \xc2")],
        [bl(b"\xf0\x90\x80"), bl(b"A"), bl(b"\xe1\x80"), bl(b"\xe1\x80\x80")],
        ["plain", "\u4e2d\u6587", bl(b" ok")],    # tokens outside the alphabet keep their own bytes
        ["\u0120caf\u00c3\u00a9"],
    ]),
    ({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
     [[bl(b" a"), bl(b"\n")]]),
    ({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}, [
        [], ["\u2581Hello", "\u2581world"], ["\u2581\u2581x\u2581y", "\u2581z\u2581"], ["a", "\u2581b"], [""]]),
    ({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
     [["\u2581Hello", "\u2581world"]]),
    ({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False},
     [["\u2581Hello", "\u2581world"]]),
    ({"type": "Metaspace", "replacement": "_", "add_prefix_space": True}, [["_a_b", "_c"]]),
    ({"type": "Metaspace", "replacement": "_", "add_prefix_space": False, "prepend_scheme": "never"}, [["_a", "_c"]]),
    ({"type": "WordPiece", "prefix": "##", "cleanup": True}, [
        [], ["hello", "##world", "!"], ["i", "do", "not", "know", ",", "it", "'", "s", "ok", "."],
        ["he", "'", "s", "here", "we", "'", "re", "they", "'", "ve", "i", "'", "m", "can", "n't", "?"],
        ["##start", "a", "##"], ["x do", "not"]]),
    ({"type": "WordPiece", "prefix": "##", "cleanup": False}, [["hello", "##world", "!", "."]]),
    ({"type": "WordPiece", "prefix": "", "cleanup": False}, [["a", "b"]]),
    ({"type": "BPEDecoder", "suffix": "</w>"}, [["hel", "lo</w>", "wor", "ld</w>"], ["a</w>b</w>", "c</w>"], ["x"]]),
    ({"type": "BPEDecoder", "suffix": ""}, [["ab", "c"]]),
    ({"type": "ByteFallback"}, [
        [], ["<0x61>", "b", "<0xC3>", "<0xA9>", "c"], ["<0xC3>", "x", "<0xA9>"], ["<0xE4>", "<0xB8>"],
        ["<0x+A>", "<0xg1>", "<0x0a>", "<0x0A>", "<0x1>", "<0x123>", "<0x-1>", "<0X41>"],
        ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"], ["<0xFF>"]]),
    ({"type": "Fuse"}, [[], ["a", "b", " c"]]),
    ({"type": "Strip", "content": " ", "start": 1, "stop": 0}, [[" a", "  b", "c", ""]]),
    ({"type": "Strip", "content": "\u2581", "start": 2, "stop": 2}, [["\u2581\u2581\u2581a\u2581\u2581\u2581", "\u2581a", "x"]]),
    ({"type": "Strip", "content": "x", "start": 0, "stop": 1}, [["axx", "x", "ab"]]),
    ({"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, [["\u2581a\u2581\u2581b", "", "c"]]),
    ({"type": "Replace", "pattern": {"String": ""}, "content": "-"}, [["ab", ""]]),
    ({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": "_"}, [["a  b\t\nc", "d"]]),
    ({"type": "Replace", "pattern": {"Regex": "x*"}, "content": "-"}, [["axxb", ""]]),
    ({"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True}, [
        [], ["<pad>", "h", "h", "e", "<pad>", "l", "l", "<pad>", "l", "o", "|", "|", "w", "o", "r", "l", "d"],
        ["a", " .", "|", "b", "do", "<pad><pad>", "x|y"]]),
    ({"type": "CTC", "pad_token": "[PAD]", "word_delimiter_token": " ", "cleanup": False},
     [["a", "a", "[PAD]", "a", "|", " ."]]),
    (LLAMA2, [["\u2581Hello", "\u2581world", "<0x21>"], ["<0xE4>", "<0xB8>", "<0xAD>", "\u2581x"], ["\u2581\u2581a"]]),
    ({"type": "Sequence", "decoders": []}, [["a", "b"]]),
    ({"type": "Sequence", "decoders": [{"type": "ByteFallback"}, BYTELEVEL]}, [["<0x41>", bl(b" b")]]),
]


def main():
    out = []
    for dec, inputs in CASES:
        d = build(dec)
        out.append({"decoder": dec, "io": [{"tokens": toks, "text": d.decode(toks)} for toks in inputs]})
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(out, f, ensure_ascii=True, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
