"""What the app's menus offer and how it launches: plain data and functions, no gradio (``app.py`` wires them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spec_core.core import guards
from spec_core.engine.methods import known_methods, spec_of
from visuals.stepthrough import step_css
from visuals.style import token_css

GETTYSBURG = (  # Abraham Lincoln, the Gettysburg Address (1863), public domain: its first two paragraphs
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in "
    "Liberty, and dedicated to the proposition that all men are created equal. Now we are engaged in a great civil "
    "war, testing whether that nation, or any nation so conceived and so dedicated, can long endure. We are met on "
    "a great battle-field of that war. We have come to dedicate a portion of that field, as a final resting place "
    "for those who here gave their lives that that nation might live. It is altogether fitting and proper that we "
    "should do this."
)
PREAMBLE = (  # the Preamble of the Constitution of the United States (1787), public domain
    "We the People of the United States, in Order to form a more perfect Union, establish Justice, insure domestic "
    "Tranquility, provide for the common defence, promote the general Welfare, and secure the Blessings of Liberty "
    "to ourselves and our Posterity, do ordain and establish this Constitution for the United States of America."
)
CODE = (  # a small function to edit: an edit copies most of its input
    "def mean(values):\n    total = 0\n    for value in values:\n        total = total + value\n"
    "    return total / len(values)"
)


@dataclass(frozen=True)
class Preset:
    """One of the live tab's tasks (Spec-Bench's categories, Xia et al. 2024, arXiv 2401.07851): a prompt, the
    three methods it runs, and why the task accepts more or fewer drafts (the example's label)."""

    task: str
    why: str
    prompt: str
    methods: tuple[str, str, str]

    @property
    def label(self) -> str:
        return f"{self.task}: {self.why}"


# The first preset is what a new visitor sees: a task where copying pays (the hybrid: the payoff against ar) and, in
# lane B, the two papers' rules at once (PACER sets the length, DIVERSED's w_t decides what is kept), so that the
# threshold, w_t and the training lens all have rounds without a setting changed; the fixed window they are drawn
# beside is replayed on the run's own text (ui/live_baseline.py), one recorded pass instead of a fourth lane. Asked
# only to quote key phrases, the embedded target's first token is an exact tie at bfloat16 between "The" (a
# paraphrase that copies almost nothing) and "Four" (a quote): a change in summation order flipped it between
# commits. Asked to begin with the opening words, it quotes at every precision (docs/LOG.md, 2026-12-02).
PRESETS = (
    Preset(
        "Summarize a passage",
        "a summary that quotes the passage copies its phrases, so copied drafts are kept",
        "Summarize this passage in two sentences, quoting its key phrases. Begin with its opening words."
        f"\n\n{GETTYSBURG}",
        ("hybrid", "pacer+diversed", "ar"),
    ),
    Preset(
        "Answer from a passage",
        "the answer is in the passage: lookup copies it word for word",
        f"{PREAMBLE}\n\nAccording to this passage, what are the six purposes of the Constitution? List them.",
        ("lookup", "hybrid", "ar"),
    ),
    Preset(
        "Edit code",
        "an edit keeps most of the code: long copied runs",
        f"Add type hints and a docstring to this Python function. Keep the code otherwise the same.\n\n{CODE}",
        ("hybrid", "lookup", "ar"),
    ),
    Preset(
        "Translate",  # a WMT14 German sentence from Spec-Bench's translation questions (Apache-2.0)
        "few words to copy: only the draft model helps, and names and numbers copy",
        "Translate German to English: Pfandhäuser boomen in Singapur , da die Krise in der Mittelschicht "
        "angekommen ist",
        ("hybrid", "fixed:2", "ar"),
    ),
    Preset(
        "Math",  # a GSM8K question from Spec-Bench's math reasoning questions (Apache-2.0)
        "a worked answer repeats the question's numbers and its own steps",
        "Jen decides to travel to 3 different countries. He has to pay $400 for the supplies he needs, in total. "
        "The tickets for travel cost, in total, 50% more than the supplies. How much does travel cost?",
        ("hybrid", "pacer", "ar"),
    ),
    Preset(
        "Chat",
        "open-ended text: nothing to copy, the draft model alone decides",
        "Explain in three sentences why the sky is blue.",
        ("pacer", "fixed:4", "ar"),
    ),
    Preset(
        "Lossy verification",
        "DIVERSED and a static mix keep more drafts by giving up the target's exact text",
        "What is the capital of France? Answer in one word.",
        ("fixed:4+diversed", "fixed:4+static:0.7", "fixed:4"),
    ),
)
EXAMPLES = [[p.prompt, *p.methods] for p in PRESETS]  # the live tab's examples: prompt and three methods
EXAMPLE_LABELS = [p.label for p in PRESETS]


def live_method_choices() -> list[str]:
    """Every engine method the live tab can run (peers, which run transformers' own generate, are bench-only)."""
    return [m for m in known_methods() if spec_of(m).kind != "peer"]


PHONE_PX = 600  # at most this wide, the page is read on a phone (assets/app.css's media query says the same)
# Run once the page has loaded: on a phone the glossary starts closed (open, its definitions sat in a 70-px column
# under a page already 13,000 px tall); on a wider screen it stays open, as the intro's link to it expects. The
# accordion's button can appear before it is marked open (a slow load), so the page watches for up to 10 s until it
# sees it open and closes it once; a visitor's own tap (a trusted click) ends the watch, so a tap is never undone.
CLOSE_GLOSSARY_ON_PHONE = f"""() => {{
  if (window.innerWidth > {PHONE_PX}) return;
  let done = false;
  const close = () => {{
    if (done) return true;
    const b = document.querySelector('#glossary-box > button.label-wrap');
    if (!b) return false;
    if (!b.dataset.watched) {{
      b.dataset.watched = '1';
      b.addEventListener('click', e => {{ if (e.isTrusted) done = true; }});
    }}
    if (b.classList.contains('open')) {{ done = true; b.click(); }}
    return done;
  }};
  if (!close()) {{ const t = setInterval(() => {{ if (close()) clearInterval(t); }}, 100); setTimeout(() => clearInterval(t), 10000); }}
}}"""


def launch_kwargs(css_path: Path | None = None) -> dict[str, Any]:
    """Launch options shared by ``app.py``'s ``__main__`` and the tests (Gradio 6 takes CSS at launch)."""
    css_paths = [css_path] if css_path is not None and Path(css_path).exists() else None
    return {
        "css": token_css() + step_css(),
        "css_paths": css_paths,
        "js": CLOSE_GLOSSARY_ON_PHONE,
        "ssr_mode": False,
        "max_file_size": guards.MAX_UPLOAD_BYTES,
    }
