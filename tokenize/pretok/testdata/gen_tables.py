"""Generate ../tables_gen.go: the character classes that Hugging Face tokenizers 0.23.2 uses in its
pre-tokenizers, measured by running the pre-tokenizers themselves over every code point.

Oniguruma (Split / ByteLevel regexes) and Rust's std and regex crates follow Unicode 16, Go's unicode package
follows 15.0, and the `unicode_categories` crate behind BertPreTokenizer / Punctuation is older still, so the
classes are measured here rather than taken from Go's tables.

Run with the tokenizers==0.23.2 venv:  python testdata/gen_tables.py  (from tokenize/pretok).
"""
import os
import sys

import tokenizers
from tokenizers import Regex
from tokenizers import pre_tokenizers as pt

assert tokenizers.__version__ == "0.23.2", tokenizers.__version__

CPS = [c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF)]
TEXT = "".join(chr(c) for c in CPS)


def kept_chars(ptok, cps, text):
    """Code points that survive in some word of ptok.pre_tokenize_str(text)."""
    kept = set()
    for w, (a, b) in ptok.pre_tokenize_str(text):
        assert text[a:b] == w
        kept.update(cps[a:b])
    return kept


def removed_by(ptok):
    return set(CPS) - kept_chars(ptok, CPS, TEXT)


def onig_class(pattern):
    # Split(removed) drops exactly the matched code points.
    return removed_by(pt.Split(Regex(pattern), "removed"))


def alternating(ptok, cps, probe):
    """ptok splits a text without separators into alternating runs of two kinds; return the code points of
    the runs of the same kind as the probe code point."""
    text = "".join(chr(c) for c in cps)
    words = ptok.pre_tokenize_str(text)
    words.sort(key=lambda w: w[1][0])
    idx = cps.index(probe)
    parity = next(k % 2 for k, (_, (a, b)) in enumerate(words) if a <= idx < b)
    out = set()
    for k, (_, (a, b)) in enumerate(words):
        if k % 2 == parity:
            out.update(cps[a:b])
    return out


classes = {}
classes["L"] = onig_class(r"\p{L}")
classes["N"] = onig_class(r"\p{N}")
space = onig_class(r"\s")
assert space == removed_by(pt.WhitespaceSplit()), "onig \\s != Rust char::is_whitespace"
classes["S"] = space
classes["Up"] = onig_class(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]")
classes["Low"] = onig_class(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]")
classes["Num"] = alternating(pt.Digits(individual_digits=False), CPS, ord("0"))
classes["Punct"] = removed_by(pt.Punctuation("removed"))
# Whitespace = Rust regex `\w+|[^\w\s]+`, whitespace removed.
ws_space = removed_by(pt.Whitespace())
assert ws_space == space, "regex \\s != onig \\s"
nonspace = [c for c in CPS if c not in space]
classes["Word"] = alternating(pt.Whitespace(), nonspace, ord("a"))

GC = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
      "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co"]
gc = {}
for name in GC:
    for c in onig_class(r"\p{%s}" % name):
        assert c not in gc, "code point %X in two categories" % c
        gc[c] = name
onig_word = onig_class(r"\w")
# Inside a bracket, Oniguruma's \w leaves out six Latin-1 characters (superscripts and fractions) that a bare \w
# matches.
onig_word_in_class = onig_class(r"[\w]")
assert onig_class(r"[\s]") == space and onig_class(r"[\d]") == onig_class(r"\d") == set(
    c for c in gc if gc[c] == "Nd"), "\\s or \\d differ inside a class"
assert onig_class(r"[\p{L}]") == classes["L"], "\\p{L} differs inside a class"



def boundaries(ptok, text):
    """Start offsets of the words of ptok on text."""
    return {a for _, (a, b) in ptok.pre_tokenize_str(text)}


# UnicodeScripts: its script table (with Hiragana and Katakana folded into Han, U+30FC Han and ' ' "Any") is
# measured as equivalence classes. A character c is "Any" when neither "a c α" nor "α c a" splits before c.
us = pt.UnicodeScripts()
ANY_PROBES = [("a", "\u03b1"), ("\u03b1", "a")]
not_any = set()
for left, right in ANY_PROBES:
    cut = boundaries(us, "".join(left + chr(c) + right for c in CPS))
    not_any.update(c for k, c in enumerate(CPS) if 3 * k + 1 in cut)
scripted = [c for c in CPS if c in not_any]
# Runs of one script among the scripted characters in code point order, then one id per distinct script:
# compare each run's first character with one representative of every script seen so far.
cut = boundaries(us, "".join(chr(c) for c in scripted))
reps = []  # representative code point of script id i+1
script_of = {}
run_start = None
for k, c in enumerate(scripted):
    if k in cut or k == 0:
        probe = "".join(chr(c) + chr(r) for r in reps)
        pc = boundaries(us, probe) if reps else set()
        same = [i for i in range(len(reps)) if 2 * i + 1 not in pc]
        assert len(same) <= 1, "run at %X matches two scripts" % c
        if same:
            sid = same[0] + 1
        else:
            reps.append(c)
            sid = len(reps)
    script_of[c] = sid
script_ranges = []
for c in scripted:
    sid = script_of[c]
    if script_ranges and script_ranges[-1][1] == c - 1 and script_ranges[-1][2] == sid:
        script_ranges[-1][1] = c
    else:
        script_ranges.append([c, c, sid])

BITS = ["L", "N", "S", "Up", "Low", "Num", "Punct", "Word"]
mask = {}
for i, name in enumerate(BITS):
    for c in classes[name]:
        mask[c] = mask.get(c, 0) | (1 << i)

ranges = []
for c in sorted(mask):
    m = mask[c]
    if ranges and ranges[-1][1] == c - 1 and ranges[-1][2] == m:
        ranges[-1][1] = c
    else:
        ranges.append([c, c, m])

gc_ranges = []
for c in sorted(gc):
    if gc_ranges and gc_ranges[-1][1] == c - 1 and gc_ranges[-1][2] == gc[c]:
        gc_ranges[-1][1] = c
    else:
        gc_ranges.append([c, c, gc[c]])

def runs(cs):
    out = []
    for c in sorted(cs):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


word_ranges = runs(onig_word)
word_in_class_ranges = runs(onig_word_in_class)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tables_gen.go")
with open(out, "w") as f:
    f.write("// Code generated by testdata/gen_tables.py from Hugging Face tokenizers 0.23.2; DO NOT EDIT.\n\n")
    f.write("package pretok\n\n")
    f.write("// classRanges lists, in code point order, the runs of code points whose class bits (cL ... cWord) are\n")
    f.write("// not all zero, as measured on tokenizers 0.23.2.\n")
    f.write("var classRanges = [...]classRange{\n")
    for lo, hi, m in ranges:
        f.write("\t{0x%04X, 0x%04X, 0x%02X},\n" % (lo, hi, m))
    f.write("}\n\n")
    f.write("// gcRanges lists, in code point order, the runs of assigned code points of one Unicode general category\n")
    f.write("// according to Oniguruma's \\p{..} classes in tokenizers 0.23.2 (surrogates and unassigned code points left out).\n")
    f.write("var gcRanges = [...]gcRange{\n")
    for lo, hi, name in gc_ranges:
        f.write("\t{0x%04X, 0x%04X, gc%s},\n" % (lo, hi, name))
    f.write("}\n\n")
    f.write("// onigWordRanges lists the runs of code points that Oniguruma's \\w matches in tokenizers 0.23.2.\n")
    f.write("var onigWordRanges = [...][2]rune{\n")
    for lo, hi in word_ranges:
        f.write("\t{0x%04X, 0x%04X},\n" % (lo, hi))
    f.write("}\n\n")
    f.write("// scriptRanges lists the runs of code points that UnicodeScripts gives a script, with an id per script\n")
    f.write("// (1 ...); code points left out are its \"Any\", which never starts a word.\n")
    f.write("var scriptRanges = [...]scriptRange{\n")
    for lo, hi, sid in script_ranges:
        f.write("\t{0x%04X, 0x%04X, %d},\n" % (lo, hi, sid))
    f.write("}\n\n")
    f.write("// onigWordInClassRanges lists the runs of code points that Oniguruma's \\w matches inside a bracket ([\\w]).\n")
    f.write("var onigWordInClassRanges = [...][2]rune{\n")
    for lo, hi in word_in_class_ranges:
        f.write("\t{0x%04X, 0x%04X},\n" % (lo, hi))
    f.write("}\n")
print("wrote %s: %d class ranges, %d category ranges, %d word ranges, %d script ranges (%d scripts)" % (
    out, len(ranges), len(gc_ranges), len(word_ranges), len(script_ranges), len(reps)), file=sys.stderr)
