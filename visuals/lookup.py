"""Prompt lookup's view: on a recorded text, what a longer or shorter copy would have paid (no model call).

The Playground's record holds the prompt and the target's greedy answer, which is all a lookup draft depends on
(:mod:`spec_core.engine.lookup_replay`). Bars: the predicted speedup over ``ar`` of copying up to k tokens a round for
several k (transformers' and vLLM's usual 10 among them), of ``lookup`` as it runs (its length from this
machine's costs and the copy's own evidence), and of the oracle that knows what the target keeps; each priced by
the record's cost profile, named in the caption. Beside them, what the copies offer: how often a copy was there
at all, and how much of it the answer bore out.

In the Live tab (a plug-in view, :mod:`visuals.views`), lanes that copy (``lookup``, ``hybrid``) or price their
length (``cost``) get "copied or drafted": each round's kept drafts by source, beside a fixed window.
"""

from __future__ import annotations

import plotly.graph_objects as go

from spec_core.core.cost_model import accelerator_profile
from spec_core.core.lane_speed import DEFAULT_DRAFT_RATIO
from spec_core.core.types import RoundEvent
from spec_core.drafters import is_copied
from spec_core.drafters.lookup import HybridDraft, LookupDraft
from spec_core.engine.lookup_replay import COPY_WINDOWS, copies, copy_replays
from spec_core.engine.replay import TextRecord, default_costs
from spec_core.policies.cost import CostLength
from visuals.plots import (
    Lanes,
    base_layout,
    copied_round,
    drafted_line,
    drafting_lanes,
    kept_bars,
    per_round_layout,
    round_markers,
)
from visuals.style import OKABE_ITO, series_style
from visuals.views import View, register_view

INTRO = (
    "**Prompt lookup on this text.** A lookup draft copies what followed the text's last words earlier in the "
    "prompt or the answer, so on a recorded answer every copy is known. The bars replay copying up to k tokens a "
    "round, `lookup`'s own choice, and an oracle that knows what the target keeps."
)


def copy_view(record: TextRecord | None) -> tuple[go.Figure, str]:
    """(grouped bars of predicted speedup per way of choosing the copy's length, on the record's machine and on
    the accelerator model: the hardware lens for copies; a caption in numbers)."""
    fig = go.Figure()
    if record is None:
        base_layout(fig, "Prompt lookup on this text", "", "", empty=True, empty_text="Record a text first")
        return fig, INTRO
    profile = record.costs or default_costs(record.meta.get("dtype"))
    gpu = accelerator_profile(DEFAULT_DRAFT_RATIO)
    banned = frozenset(record.meta.get("special_ids", ()))  # recorded with the text (an older record: none)
    rows = copy_replays(record.prompt_ids, record.tokens, profile, record.max_new_tokens, banned)
    gpu_rows = copy_replays(record.prompt_ids, record.tokens, gpu, record.max_new_tokens, banned)
    for priced, label, colour, pattern in (
        (rows, f"{profile.name} (measured)" if profile.measured else profile.name, OKABE_ITO["blue"], ""),
        (gpu_rows, "GPU-like (a model)", OKABE_ITO["orange"], "/"),
    ):
        fig.add_trace(
            go.Bar(
                x=[r.policy for r in priced],
                y=[r.speedup for r in priced],
                name=label,
                marker={"color": colour, "pattern": {"shape": pattern}},
                customdata=[[r.tau, len(r.lengths), sum(r.lengths), sum(r.kept)] for r in priced],
                text=[f"{r.speedup:.2f}×" for r in priced],
                textposition="outside",
                hovertemplate="%{x}: predicted %{y:.2f}× ar<br>τ %{customdata[0]:.2f} over %{customdata[1]} rounds"
                "<br>copied %{customdata[2]} tokens, kept %{customdata[3]}<extra>" + label + "</extra>",
            )
        )
    fig.add_hline(y=1.0, line={"color": OKABE_ITO["grey"], "dash": "dot"}, annotation_text="ar")
    base_layout(
        fig,
        "Prompt lookup: what each copy length would have paid",
        "how the copy's length is chosen (k: up to k tokens a round)",
        "predicted speedup over ar",
        note=f"{len(record.tokens)} tokens of one recorded answer · {profile.name} and the accelerator model",
    )
    fig.update_layout(barmode="group")
    top = max([r.speedup for r in rows + gpu_rows] + [1.0])
    fig.update_yaxes(range=[0, top * 1.15])  # room for the labels above the bars
    best_gpu = max(gpu_rows[: len(COPY_WINDOWS)], key=lambda r: r.speedup)
    hardware = (
        f" On the accelerator model (a pass over up to 64 tokens costs one step; a model, not a measurement) the "
        f"same copies give {best_gpu.policy} {best_gpu.speedup:.2f}× and `lookup` "
        f"{next(r for r in gpu_rows if r.policy == 'lookup (cost)').speedup:.2f}×: where wide passes are cheap, "
        "long copies pay."
    )
    return fig, copy_caption(record, rows, profile) + hardware


def copy_caption(record: TextRecord, rows, profile) -> str:
    """The view's sentence, from its own numbers."""
    at = copies(record.prompt_ids, record.tokens, banned=frozenset(record.meta.get("special_ids", ())))
    offered = sum(1 for c in at if c.tokens)
    borne = sum(1 for c in at if c.match)
    by = {r.policy: r for r in rows}
    windows = [by[f"k={k}"] for k in COPY_WINDOWS]
    best = max(windows, key=lambda r: r.speedup)
    own, oracle, peers = by["lookup (cost)"], by["oracle"], by["k=10"]
    return (
        f"{INTRO}\n\nOn this answer a copy was on offer at {offered} of {len(at)} positions and its first token "
        f"was right at {borne}. Priced by **{profile.name}**: `lookup` as it runs is predicted "
        f"**{own.speedup:.2f}×** `ar` (τ {own.tau:.2f}); the best fixed length, {best.policy}, "
        f"{best.speedup:.2f}×; the peers' k=10, {peers.speedup:.2f}×; the oracle {oracle.speedup:.2f}×. "
        f"A long copy pays where a pass over many tokens is cheap or the text repeats itself: here a pass over 9 "
        f"tokens costs {profile.verify_ratio(9):.2f}× a plain step, so a copy that fails early pays that price for "
        "one token."
    )


# -- the live view: where each round's drafts came from, and the length this machine's costs chose ---------------


def _kept_by_source(event: RoundEvent) -> tuple[int, int]:
    """(copied, drafted by a model) among the round's kept drafts that entered the text (:attr:`kept_drafts`)."""
    sources = tuple(getattr(event, "draft_sources", ()))[: event.kept_drafts]
    copied = sum(map(is_copied, sources))
    return copied, event.kept_drafts - copied


def sources_figure(lanes: Lanes) -> go.Figure:
    """Per round of each lane: kept drafts stacked by source (copied, drafted by the model), the drafted length as
    a line, and the tokens the ``cost`` policy expected the round to add (markers), beside a fixed window."""
    fig = go.Figure()
    spec = drafting_lanes(lanes)
    for i, (method, events) in enumerate(spec.items()):
        colour, dash, marker = series_style(i)
        parts = (("copied, kept", OKABE_ITO["sky"]), ("model's draft, kept", colour))
        kept_bars(fig, method, events, parts, _kept_by_source)
        fig.add_trace(drafted_line(method, events, colour, dash))
        expected = [(e.index, e.policy_trace.get("expected_tokens")) for e in events]
        expected = [(x, y - 1) for x, y in expected if y is not None]  # the round's own token apart: drafts kept
        if expected:
            hover = "the cost policy expected %{y:.2f} drafts kept"
            fig.add_trace(round_markers(method, expected, "kept drafts the costs planned for", hover, colour, marker))
    fig.update_layout(barmode="stack")
    return per_round_layout(fig, "Where the kept drafts came from, and the length the costs chose", spec)


def sources_caption(lanes: Lanes) -> str:
    """The view's sentence for each lane that copied: kept drafts by source, the copies' lengths, plan against
    outcome."""
    said = []
    for method, events in drafting_lanes(lanes).items():
        copied = sum(_kept_by_source(e)[0] for e in events)
        kept = sum(e.kept_drafts for e in events)
        copy_rounds = [e for e in events if e.draft_len and copied_round(e) and e.tree is None]
        branched = [e for e in events if e.tree is not None]  # the hybrid's rounds of both sources side by side
        planned = [e.policy_trace["expected_tokens"] - 1 for e in events if "expected_tokens" in e.policy_trace]
        if not copy_rounds and not planned:
            continue
        text = f"{method}: {copied} of its {kept} kept drafts were copied"
        if copy_rounds:
            lengths = [e.draft_len for e in copy_rounds]
            text += (
                f", in {len(copy_rounds)} of {len(events)} rounds (copies of {min(lengths)}–{max(lengths)} tokens, "
                f"{sum(lengths) / len(lengths):.1f} on average)"
            )
        if branched:
            by_model = sum(1 for e in branched if e.kept_drafts and not is_copied(e.draft_sources[0]))
            by_copy = sum(1 for e in branched if e.kept_drafts and is_copied(e.draft_sources[0]))
            text += (
                f"; {len(branched)} rounds put the copy and the model's own next token side by side in one pass, "
                f"and the target kept the model's token in {by_model} of them, the copy's in {by_copy}"
            )
        if planned:
            text += (
                f"; its rounds planned for {sum(planned) / len(planned):.2f} kept drafts and kept "
                f"{sum(e.kept_drafts for e in events if 'expected_tokens' in e.policy_trace) / len(planned):.2f}"
            )
        said.append(text + ".")
    return " ".join(said)


register_view(
    View(
        "lookup_sources",
        "Prompt lookup: copied or drafted",
        "Bars: each round's kept drafts, copied from the text (sky) or drafted by the model; line: how many it "
        "drafted; markers: the drafts the cost policy expected to keep when it chose that length from this "
        "machine's pass costs. A long copy is worth its wider pass only when the copy is likely right. With "
        "`hybrid:branch=1`, where neither source is sure, both go at once (the copy and the model's next token as "
        "two branches) and the target keeps whichever it agrees with.",
        sources_figure,
        prefixes=(LookupDraft.prefix, HybridDraft.prefix, CostLength.prefix),
        describe=sources_caption,
    )
)
