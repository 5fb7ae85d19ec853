"""The decode settings of the page, listed once (FIELDS): the widgets are built from this list
(layout.py), the callbacks' positional parameters and the public API's are named from it
(`takes_settings`), and the page's values become one DecodeSettings here (`build`).

How a request's settings flow: `build` converts the values (a readable error for "lots" or 2.5,
no range checks); the decoding callback then calls Engine.check once, which validates them with
the model's context limit (DecodeSettings.validate(context_limit)) and tokenizes the prompt;
everything after that (the worker, both runs, a Step's next cycles) gets the settings and the
prompt ids already checked. Slider limits are eagle_core's own (config.MAX_*); where eagle_core
has no limit, the page's range is named below.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import torch

from eagle_core import PRESETS, DecodeSettings
from eagle_core.config import MAX_CHAIN, MAX_DEPTH, MAX_TOTAL_TOKENS, MAX_TREE_TOP_K

from .i18n import APP_TEXT

MAX_PROMPT_CHARS = 6000  # checked before tokenising, so a pasted novel fails fast
# The page's ranges where eagle_core sets none (its own bound is the model's context, or none)
PAGE_MAX_NEW_TOKENS = 512
PAGE_MAX_TEMPERATURE = 2.0
PAGE_MAX_TOP_K = 200


def page_preset() -> str:
    """The tree preset the page opens with: the published EAGLE-2 tree ("gpu", the CLI's default there too)
    where torch sees a CUDA GPU, else the CPU's, the fastest tree of 7+ drafts there ("cpu")."""
    return "gpu" if torch.cuda.is_available() else "cpu"


PAGE_PRESET = page_preset()
OPENING = PRESETS[PAGE_PRESET]  # the tree the page opens with


class Refusal(ValueError):
    """A refused input whose message the page shows in its language: `key` names the text in
    eagle_app/i18n.py (APP_TEXT), `fields` fill it in; str() is the English message."""

    def __init__(self, key: str, **fields):
        super().__init__(APP_TEXT(key, "en", **fields))
        self.key, self.fields = key, fields


@dataclass(frozen=True)
class Field:
    """One decode setting on the page: `name` is the DecodeSettings field and the key of its
    widget; `api` the callbacks' and the public API's parameter name (the name, but for
    max_new_tokens, whose API name has been "max_new" from the start); `what` names it in messages."""

    name: str
    kind: type  # int, float, or str (a choice, passed as is)
    value: object
    label: str
    minimum: float | None = None
    maximum: float | None = None  # None: a number box, not a slider
    step: float = 1
    what: str = ""
    elem_id: str | None = None
    group: str = "main"  # where the page puts it: "main", "tree" (accordion) or "sampling" (accordion)
    api: str = ""

    @property
    def param(self) -> str:
        return self.api or self.name

    def convert(self, v):
        """A widget's value (or an API caller's) -> the field's type; ValueError says which field."""
        if self.kind is str:
            return v
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise Refusal("refuse.number", what=self.what or self.name, v=repr(v)) from None
        if self.kind is int:
            if f != int(f):
                raise Refusal("refuse.whole", what=self.what or self.name, v=repr(v))
            return int(f)
        return f


# The order is the public API's: generate / step take (prompt, *these, ...) positionally.
FIELDS = (
    Field("method", str, "eagle2", "Method"),
    Field("depth", int, OPENING["depth"], "Depth (expansion steps)", 1, MAX_DEPTH, elem_id="eg-set-depth",
          group="tree"),
    Field("tree_top_k", int, OPENING["tree_top_k"], "Top-k (children per node, frontier width)", 1, MAX_TREE_TOP_K,
          what="tree top-k", elem_id="eg-set-topk", group="tree"),
    Field("total_tokens", int, OPENING["total_tokens"], "Total draft tokens verified per cycle (EAGLE-2)", 1,
          MAX_TOTAL_TOKENS, what="total tokens", elem_id="eg-set-total", group="tree"),
    Field("chain_length", int, 4, "Chain length (chain method)", 1, MAX_CHAIN, what="chain length", group="tree"),
    Field("temperature", float, 0.0, "Temperature", 0, PAGE_MAX_TEMPERATURE, 0.05, group="sampling"),
    Field("top_p", float, 1.0, "Top-p", 0.05, 1, 0.05, what="top-p", group="sampling"),
    Field("top_k", int, 0, "Top-k (0 = off)", 0, PAGE_MAX_TOP_K, what="top-k", group="sampling"),
    Field("max_new_tokens", int, 48, "Max new tokens", 4, PAGE_MAX_NEW_TOKENS, what="max new tokens",
          elem_id="eg-maxnew", api="max_new"),
    Field("seed", int, 0, "Seed", 0, None, group="sampling"),
)
NAMES = tuple(f.name for f in FIELDS)
BY_NAME = {f.name: f for f in FIELDS}


def build(values) -> DecodeSettings:
    """The page's values, in NAMES order -> DecodeSettings, converted but not yet validated
    (Engine.check validates, with the context limit). ValueError with a readable message."""
    if len(values) != len(FIELDS):
        raise ValueError(f"expected {len(FIELDS)} settings ({', '.join(NAMES)}), got {len(values)}")
    return DecodeSettings(**{f.name: f.convert(v) for f, v in zip(FIELDS, values)})


def check_prompt(prompt) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise Refusal("refuse.empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise Refusal("refuse.too_long", n=len(prompt), max=MAX_PROMPT_CHARS)
    return prompt


def takes_settings(fn):
    """For a generator callback `fn(prompt, values, *rest)`: Gradio (and the public API) passes the
    prompt and then each setting as its own positional argument; `fn` gets the settings' values
    as one tuple. The wrapper shows Gradio the signature (prompt, <each Field.param>, *rest), so
    the API's parameters keep their names and Gradio still finds `request` by its annotation."""
    assert inspect.isgeneratorfunction(fn), fn
    n = len(NAMES)
    params = list(inspect.signature(fn).parameters.values())

    @functools.wraps(fn)
    def wrapper(prompt, *args, **kw):
        return (yield from fn(prompt, args[:n], *args[n:], **kw))

    named = [inspect.Parameter(f.param, inspect.Parameter.POSITIONAL_OR_KEYWORD) for f in FIELDS]
    wrapper.__signature__ = inspect.Signature([params[0], *named, *params[2:]])
    return wrapper
