"""The decode settings as the page gives them: converted, checked, handed down."""
from __future__ import annotations

from eagle_core import METHODS, DecodeSettings

MAX_PROMPT_CHARS = 6000  # checked before tokenising, so a pasted novel fails fast


def parse_settings(method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k,
                   max_new_tokens, seed, context_limit: int | None = None) -> DecodeSettings:
    """UI values -> validated DecodeSettings. Raises ValueError with a readable message."""
    def as_int(name, v):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number (got {v!r})") from None
        if f != int(f):
            raise ValueError(f"{name} must be a whole number (got {v!r})")
        return int(f)

    def as_float(name, v):
        try:
            return float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number (got {v!r})") from None

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    s = DecodeSettings(method=method, depth=as_int("depth", depth), tree_top_k=as_int("tree top-k", tree_top_k),
                       total_tokens=as_int("total tokens", total_tokens),
                       chain_length=as_int("chain length", chain_length),
                       temperature=as_float("temperature", temperature), top_p=as_float("top-p", top_p),
                       top_k=as_int("top-k", top_k), max_new_tokens=as_int("max new tokens", max_new_tokens),
                       seed=as_int("seed", seed))
    return s.validate(context_limit)


def check_prompt(prompt) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type something (or pick an example) first.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"The prompt is {len(prompt):,} characters; this demo accepts at most {MAX_PROMPT_CHARS:,}.")
    return prompt
