"""The Learn tab's text: the algorithm in plain words, and a glossary. One idea per paragraph or list
item, at most 120 words each (tests/test_i18n.py counts them). Each measured figure is a {name}
field filled from the file that holds it (viz/figures.py), never typed here."""

INTRO = """
### Why decoding is slow, and the speculative trick
A language model writes one token per forward pass, and at batch size 1 each pass is limited by
reading all the weights, not by arithmetic: the chip mostly waits. **Speculative decoding** lets
a cheap *drafter* guess several tokens ahead, then the big *target* model checks all the guesses
in **one** forward pass. If the drafter guessed `a` tokens right, that one pass yields `a + 1`
tokens: the `a` accepted drafts plus the target's own next token, the **bonus token**.
"""

FEATURES = """
### EAGLE drafts features, not tokens
EAGLE's drafter is one small transformer layer (the *auto-regression head*) that predicts the
target's next **feature** instead of the next token. The feature is the target's top feature: its
last hidden state after the final norm, the vector its LM head reads (the EAGLE paper calls it the
"second-to-top layer", counting the LM head as the top; the official code takes the model's final,
normed output). An LM head then turns each predicted feature into token probabilities `q`.

**A draft vocabulary.** The official EAGLE-1/2 heads borrow the target's whole frozen LM head. The
EAGLE-2 head shipped here borrows only {draft_rows} of its {vocab_rows} rows, the tokens that made up
{coverage} of held-out training answers (`assets/head-smollm2-135m/config.json`): drafting is cheaper,
but a token outside them can never be drafted, only produced as the bonus token. EAGLE-3 trains
an LM head of its own over a small draft vocabulary.

**Why one layer?** The drafter runs several times per cycle, so it must cost far less than the
target. Here a second layer barely raised the head's accuracy, left τ unchanged and made drafting
much slower (`docs/training.md` has the measurement).

**The one-token shift.** The head's input at step *t* is the feature `f_t` *together with the
embedding of the token actually sampled next*, `x_{t+1}`. Features are smooth and easy to
extrapolate, but they do not say *which* token was sampled from them ("I am" or "I always"?).
Feeding the sampled token removes that uncertainty; Medusa's heads, which see `f_t` only,
cannot know it.
"""

TREE = """
### Trees, and tree attention
Instead of one guess per position, EAGLE drafts a **tree** of alternatives. **EAGLE-1** uses a
fixed, hand-chosen tree shape. **EAGLE-2** grows the tree from the head's confidence: at each of
`depth` steps it expands the `top_k` most likely paths (score = sum of log q along the path),
then keeps the best `total tokens` nodes overall. Confident contexts get deep, narrow trees;
uncertain ones get wide, shallow ones.

**EAGLE-3** keeps EAGLE-2's tree but changes the head. It reads the target at three depths, low,
middle and high (here the inputs of layers {e3_layers} of SmolLM2's {n_layers}), fused by one linear
layer, instead of the top feature alone, and it drops the feature loss, training on tokens only.
Verification still uses the target's full vocabulary, so the output stays the target's.

The EAGLE-3 paper also trains with a *training-time test*: several draft steps unrolled during
training, each fed the head's own previous output, as at draft time. It is not EAGLE-3's alone:
the EAGLE-2 head shipped here was trained with it too (`docs/training.md`, the training-time test).
The paper plots the acceptance rate at each draft step as more of the head's input is its own
predictions: EAGLE's falls step by step, EAGLE-3's stays nearly flat.

**Here, with far less data than the paper's**, the shipped EAGLE-2 head keeps the lead over the
EAGLE-3 head on every tree measured (README, "Current numbers"). Acceptance per depth, measured
with the EAGLE-2 head (tree {acc_tree}, MT-bench in English, `assets/learn/per_language.json`):
{acc_d1} of the cycles accept a draft at depth 1, and of those, {acc_d2} accept one at depth 2 too.
How both heads were trained: `docs/training.md`.

The whole tree goes through the target in a single forward pass. The **tree-attention mask**
(the small heatmap) lets each node see the committed text plus its own ancestors only, so
siblings never see each other, and each node sits at position *context length + depth*.
"""

VERIFY = """
### Verification, and why the output is unchanged ("lossless")
- **Greedy** (temperature 0): walk down from the root; a child is accepted only if it *is* the
  target's top token there. In float32 the result is the text vanilla greedy decoding writes,
  token for token; the comparison panel checks it on every run. On this app's CPU kernels that
  holds because they give a token the same logits whether the target reads it alone or inside a
  tree (`docs/performance.md`). In half precision (bf16/fp16, as GPUs usually run) a forward over k
  tokens rounds differently from a forward over one, so where the target's top two tokens nearly
  tie the two runs can part; the EAGLE maintainers say the same of FP16.
- **Sampling, this app's trees**: the drafts are the head's top-k picks, not samples, so
  `q` plays no part in the test: child `c` is accepted with probability `p(c)`. After a rejection its
  probability is set to 0 and the rest renormalised (the *residual*), so a later sibling passes
  when u < p(c) ÷ the mass left; if all fail, the bonus is sampled from what is left. A draft the
  target finds likely can still lose its draw: a rejection is chance, not a wrong guess.
- **Sampling, the classic rule** (EAGLE-1 as published samples its drafts; here the `chain`
  method at temperature > 0, while this app's EAGLE-1 uses the top-k rule above): accept a drafted
  `x` with probability `min(1, p(x)/q(x))`, otherwise sample from `norm(max(0, p − q))`. Summing
  both branches gives exactly `p(x)`: every token still follows the target's distribution.
- **One pass, two uses**: the verification forward also yields the target's true features at the
  accepted tokens, and the next cycle drafts from them; no extra pass is needed.
"""

OTHERS = """
### How EAGLE differs from the others
- **Classic speculative sampling** drafts with a separate small LLM: it needs one of the same
  family, and its guesses come from a different model.
- **Medusa** adds heads that guess tokens t+2, t+3… from the last feature alone and combines
  their top-k choices as a **Cartesian product** (figure): the heads never see each other's
  choice, so the tree contains nonsense paths such as *“I am begin”*. (Medusa's shipped tree is a
  tuned 63-node subset of that product, and its "typical acceptance" option trades exactness for
  speed; EAGLE's verification never does.)
- **Prompt lookup** copies n-grams from the prompt: excellent for edits and summaries that
  repeat the input, useless for original writing.
- **EAGLE** uses the target's own features plus the sampled token, so its drafts are both
  cheap and context-aware. Published, Vicuna-13B on MT-bench at temperature 0 on GPUs: EAGLE-1
  τ 3.98 (about 3×), EAGLE-2 τ 4.83 (about 4×), EAGLE-3 τ 6.65 (about 5.6×), each from its own
  paper. Spec-Bench's leaderboard (github.com/hemingkx/Spec-Bench, `Leaderboard.md` as updated on
  2025-04-22; Vicuna-7B-v1.3, greedy, FP16, batch size 1) lists EAGLE-2 at 2.36× with 4.34 mean
  accepted tokens on one A100 80GB, and at 2.19× with 4.35 on one RTX 3090.
- **Why ranking by q works** (EAGLE-2's finding): the head's confidence predicts how likely the
  target is to accept a draft, so the tree can grow where acceptance is likely. That is also why
  EAGLE-2 needs no new training: it reuses EAGLE-1's head and changes only how the tree is built.
- **How the head learns** (EAGLE-1/2): from the target's features on training text, predict the
  next feature (a SmoothL1 loss) and, through the frozen LM head, the target's next-token
  distribution (a soft cross-entropy against the target's own probabilities, weighted 0.1; the
  EAGLE-1 paper and its official code); EAGLE-3 keeps only a token loss.
"""

LANGUAGES = """
### English and Chinese: the same questions, different acceptance
The same benchmarks asked in English and in Chinese (table and figure, measured here with the
shipped head, {lang_prompts} prompts a set; `docs/training.md` has the commands). The EAGLE papers do not
measure Chinese, and the official EAGLE README notes that non-English data was removed from one
head's training set. SmolLM2 is trained mostly on English, and it writes poor Chinese. Its
tokenizer is a byte-level BPE: a Chinese character is three UTF-8 bytes, and a token holds one, two
or three of them, so a character costs one to three tokens (the Lesson's languages step counts
them), some of them single bytes that only make sense together (the tree shows them as ‹E4 BD›).

In the tree a token that holds part of a character is labelled with the character it builds and
its share of the bytes (‹饭 1/3›: the first of 饭's three bytes); the node that completes it shows
the character whole, and ‹E4…› marks a part whose rest the tree never drafted. τ counts tokens,
not characters: a character of three tokens needs three accepted drafts, and a wrong guess at any
of its bytes ends the accepted path.

Measured: on MGSM's grade-school maths τ is {mgsm_en} in English and {mgsm_zh} in Chinese. On
MT-bench's open-ended questions Chinese has the higher τ ({mt_zh} against {mt_en}), most in
humanities ({huma_zh} against {huma_en}) and STEM ({stem_zh} against {stem_en}). Why has not been
measured, and {lang_per_cat} prompts a category is a first look, not a ranking. Verification stays lossless in
any language: a poorer guess costs speed, never correctness.
"""

GLOSSARY = """
### Glossary
| term | meaning |
|---|---|
| **τ (tau)**, mean accepted length | tokens committed per cycle (one target forward pass), the bonus token included; the first token comes from reading the prompt, not from a cycle; vanilla = 1.00 |
| **acceptance rate at depth d** | of the cycles whose accepted path reached depth d − 1, the share that accepted a draft at depth d too (the depth chart plots it per depth; depth counts tree levels below the root) |
| **bonus token** | the target's own token after the accepted path; every cycle yields at least this one |
| **speedup** | tokens/s of EAGLE ÷ tokens/s of vanilla, same prompt, same machine, one after the other |
| **p, q** | target probability, draft probability of a token |
| **cycle** | one draft → verify → accept step (one target forward) |

*What a cycle costs decides where EAGLE wins. The hardware panel below measured {machine}
({date}, {threads} threads, `{command}`): a forward over 8 new tokens costs {t8} single-token
passes, over 16 {t16}, over 64 {t64}. A cycle of the `cpu` tree ({cpu_tree}, {cpu_nodes} tokens
verified) costs c = {cpu_c} passes with its drafting; with τ {cpu_tau} that predicts {cpu_speedup}×.
The readable tree ({explain_tree}): c = {explain_c}, τ {explain_tau}, {explain_speedup}×. The
published GPU tree ({gpu_tree}, {gpu_nodes} tokens verified): c = {gpu_c}, τ {gpu_tau},
{gpu_speedup}× here, while on a GPU such a pass costs about one. Speedups measured end to end: the
README's "Current numbers".*

*With the untrained fallback head τ ≈ 1: the output is still exactly right, just not faster.*
"""

BLOCKS = ("INTRO", "FEATURES", "TREE", "VERIFY", "OTHERS", "LANGUAGES")


def learn_blocks(lang: str = "en") -> dict[str, str]:
    """The Learn tab's Markdown in `lang` ("en", or "zh": viz/learn_zh.py): {"text": the blocks above
    the language table, "glossary": the glossary below it}."""
    from . import learn_zh

    from .figures import fill

    from .figures import figures

    src = learn_zh if lang == "zh" else globals()
    get = (lambda name: getattr(src, name)) if lang == "zh" else src.get
    values = {**figures(), **learn_figures(lang)}
    return {"text": fill("\n".join(get(name) for name in BLOCKS), values), "glossary": fill(get("GLOSSARY"), values)}


def learn_figures(lang: str = "en") -> dict[str, str]:
    """The Learn text's own fields beyond viz/figures.py's: EAGLE-3's layers (its head's config.json), the
    target's layer count (the hardware recording), and acceptance per depth and prompt counts from the
    per-language record. A missing file leaves its fields out ("—")."""
    import json
    import os

    from .figures import ROOT
    from .languages import PER_LANGUAGE_FILE

    out: dict[str, str] = {}
    try:
        with open(os.path.join(ROOT, "assets", "head3-smollm2-135m", "config.json"), encoding="utf-8") as f:
            out["e3_layers"] = ("、" if lang == "zh" else ", ").join(str(i) for i in json.load(f)["eagle_explainer"]["layers"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        from eagle_core.machine import load_recorded

        out["n_layers"] = str(load_recorded()["weights"]["layers"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(PER_LANGUAGE_FILE, encoding="utf-8") as f:
            runs = {r["prompts"]: r for r in json.load(f)[0]["runs"]}
        en = runs["mt_bench_question.jsonl"]
        acc = en["overall"]["acceptance_by_depth"]
        out.update(acc_tree=",".join(str(x) for x in en["tree"]), acc_d1=f"{100 * acc['1']:.0f}%",
                   acc_d2=f"{100 * acc['2']:.0f}%", lang_prompts=str(en["overall"]["prompts"]),
                   lang_per_cat=str(next(iter(en["by_category"].values()))["prompts"]))
    except (OSError, ValueError, KeyError, TypeError, IndexError, StopIteration):
        pass
    return out
