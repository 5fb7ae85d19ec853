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
target's next **feature** — its second-to-top-layer hidden state — instead of the next token.
The target's own frozen LM head turns each predicted feature into token probabilities `q`.
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
exactly as at draft time. So its errors do not compound with depth the way EAGLE-1/2's do, and
deeper drafts get accepted (the paper: τ ≈ 6.5 against ≈ 4.8 for EAGLE-2 on Vicuna-13B). It
drafts from its own small vocabulary (`d2t` maps a draft id to a target id); verification still
uses the full one, so the output stays exactly the target's. The EAGLE-3 head shipped here for
SmolLM2 has had 1.5 hours of training on a CPU (~1.4 M tokens): τ 1.60 on MT-bench against 1.92
for the EAGLE-2 head, which has had far more (its first 29 minutes gave 1.45). Its accuracy
was still climbing when training stopped (first guess right 29% → 37% of the time over its last
hour); the paper's gain needs far more training than a 2-core CPU gives.
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
  target's top token there. The result is therefore token-for-token the text vanilla greedy
  decoding would write — the comparison panel checks this on every run.
- **Sampling**: at each node, child `c` is accepted with probability `p(c)`; after a rejection
  its probability is set to 0 and the rest renormalised (the *residual*) before the next
  sibling is tried; if all fail, the bonus is sampled from what is left. For sampled drafts the
  classic rule accepts `x` with probability `min(1, p(x)/q(x))` and otherwise samples from
  `norm(max(0, p − q))`. Summing both branches gives exactly `p(x)`: every token still follows
  the target's distribution.
"""

OTHERS = """
### How EAGLE differs from the others
- **Classic speculative sampling** drafts with a separate small LLM: it needs one of the same
  family, and its guesses come from a different model.
- **Medusa** adds heads that guess tokens t+2, t+3… from the last feature alone and combines
  their top-k choices as a **Cartesian product** (figure): the heads never see each other's
  choice, so the tree contains nonsense paths such as *“I am begin”*.
- **Prompt lookup** copies n-grams from the prompt: excellent for edits and summaries that
  repeat the input, useless for original writing.
- **EAGLE** uses the target's own features plus the sampled token, so its drafts are both
  cheap and context-aware; published results reach τ ≈ 4 and 2–3× speedups on GPUs.
"""

LANGUAGES = """
### English and Chinese: the same questions, different acceptance
The same benchmark asked in English and in Chinese (table and figure, measured here with the shipped
tenth head; `docs/training.md` has the commands). The EAGLE papers' readers expect the head to
accept less in Chinese: SmolLM2 is trained mostly on English, and its byte-level vocabulary splits
many Chinese characters into two or three tokens, some of them single bytes that only make sense
together (the tree shows them as ‹E4 BD›). The second head, trained on English-heavy reference
answers, showed that gap on MGSM's grade-school maths (tau 2.11 vs 1.64). The later heads learned
from the target's own answers, Chinese prompts among them, and the gap closed: MGSM 2.26 in
English vs 2.29 in Chinese. On MT-bench's open-ended questions Chinese comes out ahead (2.28 vs
1.92): free English writing is hard to guess, and 16 prompts a set is a first measurement, not a
ranking. Verification stays lossless in any language: a poorer guess costs speed, never
correctness.
"""

GLOSSARY = """
### Glossary
| term | meaning |
|---|---|
| **τ (tau)**, mean accepted length | tokens committed per target forward pass, bonus included; vanilla = 1.00 |
| **acceptance rate** | share of tested draft tokens the target accepted (the depth chart shows it per level) |
| **bonus token** | the target's own token after the accepted path; every cycle yields at least this one |
| **speedup** | tokens/s of EAGLE ÷ tokens/s of vanilla, same prompt, same machine, one after the other |
| **p, q** | target probability, draft probability of a token |
| **cycle** | one draft → verify → accept step (one target forward) |

*On this app's CPU a cycle costs about two single-token target passes plus drafting, so EAGLE
only wins when τ is well above 2. With the untrained fallback head τ ≈ 1: the output is still
exactly right, just not faster.*
"""
