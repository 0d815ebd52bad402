"""Check a gload SFT dataset (input_ids + labels) with the real Hugging Face packages.

Usage: check_hf_labels.py DATASET_DIR EXPECTED_JSON   (EXPECTED_JSON: {"input_ids": [[...]], "labels": [[...]]})

datasets.load_from_disk must show both columns as lists of int32 with exactly the expected rows, in that order;
prints "ok" or what differs (exit 1).
"""

import json
import sys

import datasets


def main():
    ddir, exp = sys.argv[1], sys.argv[2]
    with open(exp, encoding="utf-8") as f:
        want = json.load(f)
    ds = datasets.load_from_disk(ddir)
    if ds.column_names[:2] != ["input_ids", "labels"]:
        print(f"FAIL: columns {ds.column_names}")
        sys.exit(1)
    for name in ("input_ids", "labels"):
        feat = ds.features[name]
        if getattr(feat, "feature", None) is None or feat.feature.dtype != "int32":
            print(f"FAIL: {name} feature {feat!r}")
            sys.exit(1)
        got = ds[name]
        if got != want[name]:
            print(f"FAIL: {name} differs")
            sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
