"""The hardware lens: one recorded text, its policies priced under several machines' costs (no model call).

Whether speculation pays is a fact of the machine: the price of verifying k tokens against one plain step. The
lens replays the chosen policy, the best fixed window and the oracle on the Playground's record under each
:class:`~spec_core.core.cost_model.CostProfile` it is given — the run's own measured costs, this machine's measured
table per precision, and the memory-bound accelerator *model* (labelled as a model, its parameters on screen) —
so a student sees the same rounds win on one machine and lose on another.
"""

from __future__ import annotations

import dataclasses

import plotly.graph_objects as go

from spec_core.core.cost_model import CostProfile, accelerator_profile
from spec_core.core.lane_speed import DEFAULT_DRAFT_RATIO
from spec_core.engine.replay import ORACLE, TextRecord, best_fixed, policy_name, replay_all
from visuals.plots import base_layout
from visuals.style import OKABE_ITO

INTRO = (
    "**Hardware lens.** The same recorded rounds, priced on different machines. A round costs one target pass "
    "over its drafts plus the drafting; what changes from machine to machine is how much a pass over k tokens "
    "costs against a one-token step. Where that price is high (a CPU without native bfloat16), speculation "
    "needs high acceptance to pay; where a pass over dozens of tokens costs one step (a GPU), it pays almost always."
)


def lens_profiles(
    record: TextRecord, machine: dict[str, CostProfile] | None = None, draft_ratio: float = DEFAULT_DRAFT_RATIO
) -> dict[str, CostProfile]:
    """Label → profile: the record's own costs, this machine's measured table (if any), the accelerator model."""
    out: dict[str, CostProfile] = {}
    if record.costs is not None:
        out["the recorded run (measured)"] = record.costs
    for precision, profile in (machine or {}).items():
        out[f"this machine · {precision} (measured)"] = profile
    out["GPU-like (a model)"] = accelerator_profile(draft_ratio)
    return out


def lens_rows(record: TextRecord, policy, profiles: dict[str, CostProfile]) -> list[dict]:
    """Per profile: predicted speedup of the chosen policy, the best fixed window there, and the oracle."""
    rows = []
    for label, profile in profiles.items():
        priced = dataclasses.replace(record, costs=profile)
        replays = replay_all(priced, [policy, *(f"fixed:{k}" for k in (1, 2, 3, 4, 6, 8)), ORACLE])
        best = best_fixed(replays)
        chosen = next((r for r in replays if r.policy == policy_name(policy)), best)  # PACER without scores
        oracle = next(r for r in replays if r.policy == ORACLE)
        rows.append(
            {
                "profile": label,
                "measured": profile.measured,
                "about": profile.about,
                "verify_4": profile.verify_ratio(4),
                "chosen": chosen.policy,
                "chosen_speedup": chosen.predicted_speedup,
                "best_fixed": best.policy,
                "best_speedup": best.predicted_speedup,
                "oracle_speedup": oracle.predicted_speedup,
                "rounds": chosen.rounds,
                "tokens": chosen.tokens,
            }
        )
    return rows


def lens_figure(rows: list[dict]) -> go.Figure:
    """Grouped bars: per profile, the chosen policy, the best fixed window and the oracle; 1.0 = ar."""
    fig = go.Figure()
    labels = [r["profile"] for r in rows]
    for key, name, color in (
        ("chosen_speedup", rows[0]["chosen"] if rows else "policy", OKABE_ITO["orange"]),
        ("best_speedup", "best fixed window", OKABE_ITO["sky"]),
        ("oracle_speedup", "oracle", OKABE_ITO["green"]),
    ):
        fig.add_bar(
            x=labels,
            y=[r[key] for r in rows],
            name=name,
            marker_color=color,
            hovertemplate="%{x}<br>" + name + ": ×%{y:.2f} over ar<extra></extra>",
        )
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="ar", annotation_position="top left")
    n = rows[0]["rounds"] if rows else 0
    tokens = rows[0]["tokens"] if rows else 0
    base_layout(
        fig,
        f"The same record on other machines ({tokens} tokens, {n} rounds of the chosen policy)",
        "cost profile",
        "predicted speedup over ar",
    )
    fig.update_layout(barmode="group")
    return fig


def lens_text(rows: list[dict]) -> str:
    """One line per profile a student can follow, the model said to be a model."""
    lines = [
        INTRO + " Each speedup is over plain decoding on the same profile (each precision against its own `ar`).",
        "",
    ]
    for r in rows:
        kind = "measured" if r["measured"] else "a model, not a measurement"
        verdict = "faster" if (r["chosen_speedup"] or 0) >= 1 else "slower"
        lines.append(
            f"- **{r['profile']}**: verifying 4 tokens costs {r['verify_4']:.2f}× a step ({kind}); "
            f"{r['chosen']} would be **{verdict} than ar there, ×{r['chosen_speedup']:.2f}** "
            f"(best fixed window there: {r['best_fixed']} ×{r['best_speedup']:.2f}; "
            f"oracle ×{r['oracle_speedup']:.2f}). <small>{r['about']}</small>"
        )
    return "\n".join(lines)


def hardware_lens(
    record: TextRecord | None,
    policy,
    machine: dict[str, CostProfile] | None = None,
    draft_ratio: float = DEFAULT_DRAFT_RATIO,
) -> tuple[go.Figure, str]:
    """(figure, markdown) of the lens for the chosen policy; an empty chart before a record exists."""
    if record is None:
        return base_layout(go.Figure(), "", "", "", empty=True, empty_text="record a text first"), INTRO
    rows = lens_rows(record, policy, lens_profiles(record, machine, draft_ratio))
    return lens_figure(rows), lens_text(rows)


def lens_view(
    machine: dict[str, CostProfile] | None, record: TextRecord | None, family: str, k, conf, b, t, rho, max_len
) -> tuple[go.Figure, str]:
    """The app's callback: the Playground's knobs → the lens of the policy they describe."""
    from visuals.playground import chosen_policy

    if record is None:
        return hardware_lens(None, None)
    ratio = float(record.meta.get("draft_ratio", DEFAULT_DRAFT_RATIO)) if record.meta else DEFAULT_DRAFT_RATIO
    return hardware_lens(record, chosen_policy(family, k, conf, b, t, rho, max_len), machine, ratio)
