"""The Learn tab's text: the algorithm in plain words, and a glossary."""

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
normed output). For EAGLE-1 and EAGLE-2 the target's own frozen LM head turns each predicted
feature into token probabilities `q`.
Why one layer? The drafter runs several times per cycle, so it must be far cheaper than the
target. Here a second layer was tried: it raised the head's accuracy by half a point, left the
accepted length unchanged and doubled the drafting time. What raised it was data like the questions
asked: the shipped head learned from the target's own answers to open-ended English requests, and
accepted more on MT-bench's writing, roleplay and humanities questions (`docs/training.md`).

**The one-token shift.** The head's input at step *t* is the feature `f_t` *together with the
embedding of the token actually sampled next*, `x_{t+1}`. Features are smooth and easy to
extrapolate, but they do not say *which* token was sampled from them ("I am" or "I always"?).
Feeding the sampled token removes that uncertainty; Medusa's heads, which see `f_t` only,
cannot know it.
"""

TREE = """
### Trees, and tree attention
Instead of one guess per position, EAGLE drafts a **tree** of alternatives. **EAGLE-1** uses a
fixed tree shape (25 nodes). **EAGLE-2** grows the tree from the head's confidence: at each of
`depth` steps it expands the `top_k` most likely paths (score = sum of log q along the path),
then keeps the best `total tokens` nodes overall. Confident contexts get deep, narrow trees;
uncertain ones get wide, shallow ones.

**EAGLE-3** keeps EAGLE-2's tree but changes the head. It reads the target at three depths
(the inputs of a low, a middle and a high layer: layers 2, 15 and 27 of SmolLM2's 30), fused by
one linear layer, instead of only the top feature, which is tuned to predict just the next token.
It drops the feature-regression loss and trains on tokens alone, with a *training-time test*:
several draft steps unrolled during training, each feeding the head its own previous output,
exactly as at draft time. Its acceptance then stays nearly flat with depth instead of falling
away, and deeper drafts get accepted (the EAGLE-3 paper, Vicuna-13B, MT-bench, temperature 0:
τ 6.65 against 4.83 for EAGLE-2). It has its own final norm and its own LM head over a small
draft vocabulary (`d2t` maps a draft id to a target id), where EAGLE-1/2 borrow the target's LM
head; verification still uses the target's full vocabulary, so the output stays the target's. The EAGLE-3 head shipped here for
SmolLM2 has had about 11.3 hours of training on CPUs, two full passes over the same 2.44 M answer tokens
as the EAGLE-2 head (which had 5.4 hours): τ 1.68 on all of MT-bench against 1.86 for the EAGLE-2 head
on the CPU tree, 1.39× against 1.56× vanilla (after one pass it had 1.66; the second EAGLE-3 head, after
1.5 hours, 1.56). Over the first pass its first guess went from right 35% to 45% of the time; the second
pass took it to 48%, flat at the end. At this amount of data EAGLE-2 keeps the
lead: it learns to predict the target's whole next feature (576 numbers a token) and borrows the
target's LM head, where EAGLE-3 learns from the next token alone and trains its own LM head; the
paper's gain came with far more data than a 2-core CPU can generate.
The training-time test is not tied to EAGLE-3's architecture: the EAGLE-2 heads shipped here have
been trained with it since the seventh (3, later 5 unrolled steps). When the seventh learned with
it, its accuracy where it reads its own draft rose from 0.57 to 0.61 at depth 2 (0.54 to 0.59 at
depth 3), with depth 1 unchanged.

The whole tree goes through the target in a single forward pass. The **tree-attention mask**
(the small heatmap) lets each node see the committed text plus its own ancestors only, so
siblings never see each other, and each node sits at position *context length + depth*.
"""

VERIFY = """
### Verification, and why the output is unchanged ("lossless")
- **Greedy** (temperature 0): walk down from the root; a child is accepted only if it *is* the
  target's top token there. The result is therefore the text vanilla greedy decoding would write,
  token for token — the comparison panel checks this on every run. That is exact arithmetic's
  promise: here, in float32, it holds because the engine's kernels give a token the same logits
  whether the target reads it alone or inside a tree. In half precision (bf16/fp16, as GPUs
  usually run) a forward over k tokens rounds differently from a forward over one, so where the
  target's top two tokens are nearly tied the two runs can part; the EAGLE maintainers say the
  same of FP16. Each run is still a correct greedy decode of the target to within that rounding.
- **Sampling**: here the drafts are the head's top-k picks, not samples, so each child is a
  point mass and `q` plays no part in the test: child `c` is accepted with probability `p(c)`;
  after a rejection its probability is set to 0 and the rest renormalised (the *residual*) before
  the next sibling is tried, so a later sibling passes when `u < p(c)` over the mass left; if all
  fail, the bonus is sampled from what is left. (EAGLE-1 as published samples its drafts and uses
  the classic rule; this app's EAGLE-1 uses the same top-k rule as EAGLE-2.) For sampled drafts
  the classic rule accepts `x` with probability `min(1, p(x)/q(x))` and otherwise samples from
  `norm(max(0, p − q))` (the `chain` method at temperature > 0). Summing both branches gives
  exactly `p(x)`: every token still follows the target's distribution. Under sampling a draft the
  target itself finds likely can still lose its draw: a rejection is chance, not a wrong guess.
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
  paper; on Spec-Bench (Vicuna-7B, A100, greedy) EAGLE-2 gives 2.36× at τ 4.34.
- **Why ranking by q works** (EAGLE-2's finding): the head's confidence predicts how likely the
  target is to accept a draft, so the tree can grow where acceptance is likely. That is also why
  EAGLE-2 needs no new training: it reuses EAGLE-1's head and changes only how the tree is built.
- **How the head learns** (EAGLE-1/2): from the target's features on training text, predict the
  next feature (a SmoothL1 loss) and, through the frozen LM head, the next token (a cross-entropy
  weighted 0.1); EAGLE-3 keeps only the token loss.
"""

LANGUAGES = """
### English and Chinese: the same questions, different acceptance
The same benchmark asked in English and in Chinese (table and figure, measured here with the shipped
tenth head; `docs/training.md` has the commands). One might expect the head to accept less in
Chinese (the EAGLE papers do not measure Chinese; the official EAGLE README notes that
non-English data was removed from one head's training set): SmolLM2 is trained mostly on
English, and its byte-level vocabulary splits most Chinese characters into two or three tokens,
some of them single bytes that only make sense together (the tree shows them as ‹E4 BD›).
In the tree a token that holds part of a character is labelled with the character it builds and
its share of the bytes (‹饭 1/3›: the first of 饭's three bytes); the node that completes it shows
the character whole, and ‹E4…› marks a part whose rest the tree never drafted. τ counts tokens,
not characters, so a Chinese τ is not Chinese text per pass: a character that takes three tokens
needs three accepted drafts, and a wrong guess at any of its bytes ends the accepted path. The second head, trained on English-heavy reference
answers, showed that gap on MGSM's grade-school maths (tau 2.11 vs 1.64). The later heads learned
from the target's own answers, Chinese prompts among them, and the gap closed: MGSM 2.26 in
English vs 2.29 in Chinese. On MT-bench's open-ended questions Chinese has the higher τ (2.28 vs
1.92), in tokens: free English writing is hard to guess, part of the Chinese gain is bytes of one
character following each other, and 16 prompts a set is a first measurement, not a ranking. Verification stays lossless in any language: a poorer guess costs speed, never
correctness.
"""

GLOSSARY = """
### Glossary
| term | meaning |
|---|---|
| **τ (tau)**, mean accepted length | tokens committed per target forward pass, bonus included; vanilla = 1.00 |
| **acceptance rate at depth d** | of the cycles whose accepted path reached depth d − 1, the share that accepted a draft at depth d too (the depth chart plots it per depth; depth counts tree levels below the root) |
| **bonus token** | the target's own token after the accepted path; every cycle yields at least this one |
| **speedup** | tokens/s of EAGLE ÷ tokens/s of vanilla, same prompt, same machine, one after the other |
| **p, q** | target probability, draft probability of a token |
| **cycle** | one draft → verify → accept step (one target forward) |

*What a cycle costs decides where EAGLE wins. Measured on this project's 2-core CPUs with the
CPU tree (3 drafted tokens, 2 deep), a cycle costs 1.20–1.39 single-token target passes (full
MT-bench; more when the machine's memory is fast, since drafting and the extra rows are not
memory-bound), so EAGLE wins once τ passes that: the shipped head's τ 1.86 gives 1.37–1.56×. The
readable tree (12 tokens, 4 deep) verifies 13 tokens, which costs about 1.4–1.8 passes on the
CPU before drafting (t(8)/t(1) = 1.38 and t(16)/t(1) = 1.84, measured), so it needs τ near 2 just
to break even. The published GPU tree verifies 61 tokens: about 5 passes on this CPU
(t(64)/t(1) = 5.1), so it loses here even at τ 2.87, while on a GPU a 61-token pass costs about as
much as one. With the untrained fallback head τ ≈ 1: the output is still exactly right, just not
faster.*
"""

BLOCKS = ("INTRO", "FEATURES", "TREE", "VERIFY", "OTHERS", "LANGUAGES")


def learn_blocks(lang: str = "en") -> dict[str, str]:
    """The Learn tab's Markdown in `lang` ("en", or "zh": viz/learn_zh.py): {"text": the blocks above
    the language table, "glossary": the glossary below it}."""
    from . import learn_zh

    src = learn_zh if lang == "zh" else globals()
    get = (lambda name: getattr(src, name)) if lang == "zh" else src.get
    return {"text": "\n".join(get(name) for name in BLOCKS), "glossary": get("GLOSSARY")}
