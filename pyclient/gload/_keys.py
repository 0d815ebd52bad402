"""What a batch dict holds: the key names, the default keys (what a causal LM's ``forward`` accepts), per-key dtypes
with Hugging Face's defaults, and the labels options (unshifted as transformers' models shift them, or next-token
targets for hand-written loops).

It does no I/O and knows nothing of the wire: ``Converter`` (``_convert.py``) asks it which keys to build and how.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

# Every key a batch can have, in the order the dict is built.
ALL_KEYS: Tuple[str, ...] = ("input_ids", "attention_mask", "labels", "position_ids", "cu_seqlens", "index", "lengths",
                              "source")  # source: mixtures only
# Keys whose dtype is the caller's choice (int32 or int64); the others have a fixed dtype.
TOKEN_KEYS: Tuple[str, ...] = ("input_ids", "attention_mask", "labels", "position_ids")
FIXED_DTYPES: Dict[str, str] = {"cu_seqlens": "int32", "index": "int64", "lengths": "int32", "source": "int64"}
DEFAULT_IGNORE_INDEX = -100  # what torch's cross_entropy and transformers' models ignore


def default_keys(policy: str, labels: Any) -> Tuple[str, ...]:
    """What ``model(**batch)`` of a transformers causal LM accepts: input_ids, attention_mask, labels (when asked for)
    and, for packed batches, position_ids."""
    keys = ["input_ids", "attention_mask"]
    if labels:
        keys.append("labels")
    if policy == "packed":
        keys.append("position_ids")
    return tuple(keys)


def check_keys(keys: Union[None, str, Sequence[str]], policy: str, labels: Any) -> Tuple[str, ...]:
    """The keys a Loader's batches hold: ``None`` → :func:`default_keys`; ``"all"`` → every key this policy makes; a
    sequence → those, each checked (an unknown or unavailable key raises, naming the valid ones)."""
    packed_only = ("position_ids", "cu_seqlens")
    if keys is None:
        return default_keys(policy, labels)
    if keys == "all":
        return tuple(k for k in ALL_KEYS if (policy == "packed" or k not in packed_only) and (labels or k != "labels"))
    if isinstance(keys, str):
        raise ValueError(f"keys {keys!r}: want a list of key names or 'all' (valid keys: {', '.join(ALL_KEYS)})")
    out = tuple(keys)
    for k in out:
        if k not in ALL_KEYS:
            raise ValueError(f"keys: unknown key {k!r}; valid keys: {', '.join(ALL_KEYS)}")
        if k in packed_only and policy != "packed":
            raise ValueError(f"keys: {k!r} exists only for policy='packed' (policy is {policy!r})")
        if k == "labels" and not labels:
            raise ValueError("keys: 'labels' asked for with labels=False")
    if len(set(out)) != len(out):
        raise ValueError(f"keys: {list(out)} names a key twice")
    return out


def check_labels(labels: Any) -> Tuple[bool, bool]:
    """(labels wanted, shifted): ``True``/``False``, or ``"shifted"`` for next-token targets."""
    if labels is True or labels is False:
        return labels, False
    if labels == "shifted":
        return True, True
    raise ValueError(f"labels {labels!r}: want True (unshifted, as transformers' models shift them), False, or "
                     "'shifted' (next-token targets: labels[t] = input_ids[t+1])")


def check_dtypes(dtype: Any, tensors: str) -> Dict[str, np.dtype]:
    """Per-key numpy dtypes. ``dtype`` is None (int64 for every token key: what transformers' models and
    cross_entropy expect), one dtype (for every token key), or a dict of token key → dtype (the rest int64).
    ``tensors`` "pt" takes torch dtypes, "np" numpy ones."""
    ok = {np.dtype(np.int32), np.dtype(np.int64)}
    if tensors == "pt":
        import torch

        to_np = {torch.int32: np.dtype(np.int32), torch.int64: np.dtype(np.int64)}
        want = "torch.int32 or torch.int64"
    else:
        to_np = {}
        want = "numpy.int32 or numpy.int64"

    def one(name: str, v: Any) -> np.dtype:
        if tensors == "pt":
            if v not in to_np:
                raise ValueError(f"dtype{name} {v!r}: want {want}")
            return to_np[v]
        try:
            dt = np.dtype(v)
        except TypeError:
            raise ValueError(f"dtype{name} {v!r}: want {want}") from None
        if dt not in ok:
            raise ValueError(f"dtype{name} {v!r}: want {want}")
        return dt

    out = {k: np.dtype(np.int64) for k in TOKEN_KEYS}
    if dtype is None:
        pass
    elif isinstance(dtype, Mapping):
        for k, v in dtype.items():
            if k not in TOKEN_KEYS:
                fixed = f" ({k} is always {FIXED_DTYPES[k]})" if k in FIXED_DTYPES else ""
                raise ValueError(f"dtype: unknown key {k!r}{fixed}; keys with a dtype: {', '.join(TOKEN_KEYS)}")
            out[k] = one(f"[{k!r}]", v)
    else:
        d = one("", dtype)
        out = {k: d for k in TOKEN_KEYS}
    for k, v in FIXED_DTYPES.items():
        out[k] = np.dtype(v)
    return out


def shift_labels_np(base: np.ndarray, ignore_index: int) -> np.ndarray:
    """Next-token targets from unshifted labels [B, L]: out[:, t] = base[:, t+1], the last column ignored. base holds
    ignore_index on padding and (packed) on every document's first token, so no target crosses a document or points
    into padding."""
    out = np.empty_like(base)
    out[:, :-1] = base[:, 1:]
    out[:, -1] = ignore_index
    return out


def torch_dtypes(dtypes: Mapping[str, np.dtype]) -> Dict[str, Any]:
    import torch

    m = {np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64}
    return {k: m[v] for k, v in dtypes.items()}


def describe_dtype(dtypes: Optional[Mapping[str, np.dtype]]) -> str:
    if not dtypes:
        return "default"
    return ", ".join(f"{k}={v}" for k, v in dtypes.items())
