"""The words the live tab uses, explained once: a short glossary, and one line per method family for lane headers."""

from __future__ import annotations

import html

from spec_core.core.errors import SpecScopeError
from spec_core.engine.methods import families, spec_of
from visuals.lossy import BADGE

GLOSSARY: tuple[tuple[str, str], ...] = (
    ("target", "the model whose output we want (here SmolLM2-135M-Instruct); it checks every draft."),
    ("draft", "a small, fast model that guesses the target's next tokens."),
    ("ar", "plain autoregressive decoding: the target alone, one forward pass per token. The baseline."),
    (
        "τ (tau)",
        "new tokens per target forward pass. ar: exactly 1; speculation pays when τ is high enough to "
        "cover the draft's cost.",
    ),
    ("α (alpha)", "accepted drafts / drafted tokens."),
    ("accepted", "a draft token the target agreed with, kept for free."),
    (
        "rejected · discarded",
        "the first draft the target disagreed with, and the drafts after it (never checked "
        "on their own): struck through, shown only with 'show rejected drafts'.",
    ),
    ("recovered", "the target's own token at the first rejection (drawn from what the draft missed)."),
    ("bonus", "one extra target token when every draft passed: the verification pass already computed it."),
    ("fixed:K", "draft K tokens every round."),
    (
        "heuristic",
        "transformers' schedule: the window grows by 2 after a round where every draft passed, shrinks by 1 otherwise.",
    ),
    ("confidence:T", "draft while the draft model's own probability of its token stays above T."),
    (
        "pacer",
        "PACER: the draft drafts a block at a time; a small trained pre-verifier predicts how likely each "
        "drafted token is to be kept, and drafting stops when the block's mean falls under a threshold "
        "that grows by ρ after every block that passes.",
    ),
    (
        "static:W · lenient:L",
        "lossy verifiers: static checks drafts against a fixed mix ν = W·p + (1 − W)·q of "
        "target and draft; lenient accepts with min(1, p / (L·q)). They keep more drafts "
        "and give up exactness.",
    ),
    (
        "diversed",
        "DIVERSED: like static, but a trained head chooses the mixing weight w_t for each drafted "
        "token from both models' hidden states (w_t = 1 is lossless at that token).",
    ),
    (
        "tree",
        "a token tree (EAGLE-2): the draft proposes several candidates per position; one target pass "
        "checks every branch at once and the longest branch the target agrees with is kept.",
    ),
    (
        "block:LOSS",
        "a block drafter proposes a whole block in one forward pass (DFlash); LOSS is how it was "
        "trained: uniform, decay (DFlash's) or dpace (D-PACE, weights on the positions the verifier "
        "is likely to reach).",
    ),
    (
        "lookup · hybrid",
        "prompt lookup copies what followed the text's last words earlier in the prompt or the answer "
        "(no draft model; copied tokens have a sky overline); hybrid copies where the copy promises more "
        "than the draft model, else lets the model draft.",
    ),
    (
        "cost",
        "the length policy of lookup and hybrid: it drafts one more token while a longer draft is worth "
        "more tokens per millisecond at this machine's pass costs.",
    ),
    (
        "lossless",
        "the verification rule that keeps the target's output distribution exactly (greedy: accept "
        "a draft iff it is the target's top token).",
    ),
    (
        "lossy",
        "a verifier that keeps drafts the target alone would not have written (static, lenient, diversed): "
        "more drafts kept, but the text is no longer the target's; such a lane wears a 'lossy' badge and "
        "says how far its text is from ar's.",
    ),
    (
        "embedded",
        "the model pair shipped with SpecScope: SmolLM2-135M-Instruct as target, the project's own "
        "trained draft; it runs offline on a CPU.",
    ),
    (
        "bfloat16 · float32",
        "precision: bfloat16 moves half the bytes of float32 (int8 a quarter); on a CPU every target pass is "
        "batch-invariant, a token's logits the same in a k-token pass as in a 1-token step, so lossless lanes "
        "write ar's text at every precision; float32 is exact arithmetic and, for one token at a time, slower.",
    ),
    (
        "speedup, measured · predicted",
        "measured: this lane's tokens/s over ar's, each on its own clock; "
        "predicted: the cost model's speedup at this lane's τ with this run's "
        "median forward costs.",
    ),
)


def glossary_html() -> str:
    """The glossary panel (its element id, ``glossary``, is what the lane headers link to)."""
    rows = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in GLOSSARY)
    return f'<div class="spec-glossary" id="glossary"><h4>Glossary</h4><dl>{rows}</dl></div>'


def lane_header(method: str) -> str:
    """A lane's heading (markdown): the method (with a "lossy" badge when its text is not the target's), what
    its family does, and a link to the glossary."""
    try:
        spec = spec_of(method)
    except SpecScopeError:  # a lane showing why its name does not parse: the name alone, no family, no badge
        spec = None
    known = families()  # from the registries: a part added there is named here with no other edit
    what = "; ".join(known[h] for h in (spec.heads if spec else ()) if h in known)
    lead = f"{html.escape(what)} · " if what else ""
    badge = f" {BADGE}" if spec is not None and spec.is_lossy else ""
    return f"### {method}{badge}\n<small>{lead}[what do these words mean?](#glossary)</small>"
