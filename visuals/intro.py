"""The first thing a visitor reads: the idea in plain words, a picture of one round, then what to press.

Basics before jargon: *token*, *draft* and *target* are explained where they first appear; the page's finer
points (precision, τ, lossy verifiers) wait for the places that use them (the settings, the lanes' counters,
the glossary). The picture is plain HTML and CSS (no script: Gradio's HTML strips it), coloured with the
token classes of :func:`visuals.style.token_css`, so it is also the key to the colours of the lanes below.
"""

from __future__ import annotations

import html

ROUND_EXAMPLE = (  # (text, kind, check mark): one round of the picture
    ("The", "accepted", "✓"),
    (" sky", "accepted", "✓"),
    (" is", "accepted", "✓"),
    (" red", "rejected", "✗"),
)
TARGET_TOKEN = " blue"


def _tok(text: str, kind: str) -> str:
    return f'<span class="tok tok-{kind}">{html.escape(text)}</span>'


def round_picture_html() -> str:
    """One round in three steps: the draft guesses, the target checks every guess in one pass, the output."""
    guesses = "".join(_tok(t, "accepted" if k == "accepted" else "rejected") for t, k, _ in ROUND_EXAMPLE)
    checks = "".join(
        f'<span class="spec-check spec-check-{"ok" if m == "✓" else "no"}">{m} {html.escape(t.strip())}</span>'
        for t, _, m in ROUND_EXAMPLE
    )
    kept = "".join(_tok(t, "accepted") for t, k, _ in ROUND_EXAMPLE if k == "accepted")
    steps = [
        ("1 · The small draft model guesses 4 tokens", guesses, "fast: a small model, one cheap step per guess"),
        (
            "2 · The big target model checks all 4 in one pass",
            checks,
            "it keeps guesses from the left while they are what it would have written itself",
        ),
        (
            "3 · Output of this round",
            kept + _tok(TARGET_TOKEN, "recovered"),
            f"3 kept guesses + the target's own word {TARGET_TOKEN.strip()!r} in place of the first wrong guess: "
            "4 tokens for one pass of the big model",
        ),
    ]
    cells = "".join(
        f'<div class="spec-round-step"><div class="spec-round-title">{html.escape(title)}</div>'
        f'<div class="spec-round-tokens">{body}</div><div class="spec-round-note">{html.escape(note)}</div></div>'
        + ('<div class="spec-round-arrow" aria-hidden="true">→</div>' if i < len(steps) - 1 else "")
        for i, (title, body, note) in enumerate(steps)
    )
    return f'<div class="spec-round-picture" role="img" aria-label="one round of speculative decoding">{cells}</div>'


def intro_html() -> str:
    """The page's opening: the idea, the picture of one round, what the Generate button shows."""
    return (
        '<div class="spec-intro" id="intro"><h1>SpecScope: watch speculative decoding</h1>'
        "<p>A language model writes text one <b>token</b> at a time (a token is a word or a piece of one), and "
        "every token costs one pass through the whole model. <b>Speculative decoding</b> makes a big model "
        "faster without changing what it writes: a small, fast <b>draft</b> model guesses the next few tokens, "
        "and the big <b>target</b> model checks all the guesses in a single pass.</p>"
        + round_picture_html()
        + "<p>Press <b>Generate</b>: three methods answer the same prompt side by side, round by round. The first "
        "two guess in different ways; <code>ar</code> is the target alone, one token per pass, the baseline. "
        "Hover over or tap any token to see why it is there. The words on the page are explained in the "
        '<a href="#glossary">glossary</a> under the lanes.</p></div>'
    )
