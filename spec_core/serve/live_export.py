"""A Live run taken away: its rounds as an events file (JSON lines) and its tokens as a table (CSV).

- The events file is the analyzer's own format (:func:`spec_core.engine.session.event_record`, one line per
  :class:`~spec_core.core.types.RoundEvent` per lane, the prompt as metadata under the one prompt id ``live``): the
  Analyzer tab's "Load a saved events file" reads it back (:func:`spec_core.serve.records.records_from_file`),
  as does the Playground's upload.
- The token table has one row per drafted or emitted token (:data:`TOKEN_COLUMNS`, docs/EXPORT.md): which lane
  and round, its place in the draft, its numbers (q, p, the acceptance probability), what became of it, and at a
  rejection both models' top-5 and the cause (:mod:`spec_core.serve.rejections`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from spec_core.core.types import TOP_K_AT_REJECTION, RoundEvent
from spec_core.engine.session import event_record, events_to_jsonl
from spec_core.serve.rejections import CAUSES, cause

Lanes = Mapping[str, Sequence[RoundEvent]]  # lane (the method as the Live tab names it) → its events

LIVE_PROMPT_ID = "live"  # the one prompt of a Live run's events file
EXAMPLES = 3  # rejections quoted per cause in the "why rejected" figure's hover
AFTER_CHARS = 48  # the text after a rejection that the cause compares (enough to see a word finished)
TOP_COLUMNS = [
    f"{model}_top{k}_{what}"
    for model in ("target", "draft")
    for k in range(1, TOP_K_AT_REJECTION + 1)
    for what in ("id", "piece", "p")
]
TOKEN_COLUMNS = [
    "lane",  # the method as the Live tab's lane names it
    "method",  # the event's method (the parsed name)
    "round",  # from 1
    "position",  # in the round's draft, from 1; the target's token takes the place after the kept drafts
    "token_id",
    "piece",  # the token's text
    "source",  # model (a draft network), lookup (copied from the text) or target (the target's own token)
    "kind",  # accepted, rejected, discarded (drafted after the rejection), recovered, bonus, target (plain step)
    "emitted",  # whether it entered the text (the end of a generation can cut a round short)
    "q",  # the draft's probability of a drafted token (the distribution it was drawn from)
    "p",  # the target's probability of the token
    "accept_prob",  # the probability with which the verifier kept a drafted token
    "q_target_token",  # at a rejection: q of the target's token (its top-1)
    "target_gap",  # at a rejection: p of the target's best token minus p of its second
    "rejection_cause",  # at a rejection: tokenization split, near-tie, real disagreement
    *TOP_COLUMNS,  # at a rejection: each model's top-5 there (id, piece, p or q), temperature-1 softmax
]
ID_COLUMNS = ["token_id", *(c for c in TOP_COLUMNS if c.endswith("_id"))]


def emitted_pieces(event: RoundEvent) -> list[str]:
    """The text of each token the round added: its kept drafts, then the target's token (cut as ``emitted``)."""
    return [*event.draft_pieces[: event.accepted], event.next_piece][: len(event.emitted)]


def _texts_after(events: Sequence[RoundEvent]) -> list[str]:
    """For each round, the first :data:`AFTER_CHARS` characters the lane wrote after it."""
    after, text = [""] * len(events), ""
    for i in range(len(events) - 1, -1, -1):
        after[i] = text
        text = ("".join(emitted_pieces(events[i])) + text)[:AFTER_CHARS]
    return after


def _rejection_columns(event: RoundEvent, written_after: str) -> dict[str, Any]:
    """The rejected draft's extra columns: both models' top-5, q(target's token), the gap, the cause."""
    r = event.rejection
    assert r is not None  # called for the rounds that carry one
    row: dict[str, Any] = {"q_target_token": r.draft_prob_of_target}
    row["target_gap"] = r.target_probs[0] - r.target_probs[1] if len(r.target_probs) > 1 else None
    for model, ids, pieces, probs in (
        ("target", r.target_ids, r.target_pieces, r.target_probs),
        ("draft", r.draft_ids, r.draft_pieces, r.draft_probs),
    ):
        for k, (t, piece, prob) in enumerate(zip(ids, pieces, probs), 1):
            row |= {f"{model}_top{k}_id": t, f"{model}_top{k}_piece": piece, f"{model}_top{k}_p": prob}
    # the target's text after its token is known where the lane wrote that token (always at temperature 0)
    target_after = written_after if event.next_token == r.target_ids[0] else ""
    row["rejection_cause"] = cause(
        event.draft_tokens[r.position],
        event.draft_pieces[r.position],
        r.target_ids,
        r.target_pieces,
        r.target_probs,
        "".join(event.draft_pieces[r.position + 1 :]),
        target_after,
    )
    return row


def _draft_kind(event: RoundEvent, i: int) -> str:
    if i < event.accepted:
        return "accepted"
    return "rejected" if i == event.accepted else "discarded"


def token_rows(lane: str, events: Sequence[RoundEvent]) -> list[dict[str, Any]]:
    """One lane's rows: every round's drafts in order, then the target's token."""
    rows = []
    for event, after in zip(events, _texts_after(events)):
        base = {"lane": lane, "method": event.method, "round": event.index + 1}
        sources = event.draft_sources or ("model",) * event.draft_len
        for i, token in enumerate(event.draft_tokens):
            row = base | {
                "position": i + 1,
                "token_id": token,
                "piece": event.draft_pieces[i],
                "source": sources[i],
                "kind": _draft_kind(event, i),
                "emitted": i < min(event.accepted, len(event.emitted)),
                "q": event.draft_probs[i],
                "p": event.target_probs[i] if i < len(event.target_probs) else None,
                "accept_prob": event.accept_probs[i] if i < len(event.accept_probs) else None,
            }
            if event.rejection is not None and i == event.rejection.position:
                row |= _rejection_columns(event, after)
            rows.append(row)
        rows.append(
            base
            | {
                "position": event.accepted + 1,
                "token_id": event.next_token,
                "piece": event.next_piece,
                "source": "target",
                "kind": event.next_kind,
                "emitted": len(event.emitted) == event.accepted + 1,
                "p": event.next_prob,
            }
        )
    return rows


def token_table(lanes: Lanes) -> pd.DataFrame:
    """Every lane's token rows, lane after lane, in :data:`TOKEN_COLUMNS` (ids as integers, blank where none)."""
    rows = [row for lane, events in lanes.items() for row in token_rows(lane, events)]
    table = pd.DataFrame(rows, columns=TOKEN_COLUMNS)
    return table.astype({c: "Int64" for c in ID_COLUMNS} | {"round": "int64", "position": "int64"})


def rejections(table: pd.DataFrame) -> pd.DataFrame:
    """The table's rejected drafts that carry a cause (a benchmark's events, kept without display, have none)."""
    return table[(table["kind"] == "rejected") & table["rejection_cause"].notna()]


def _example(row: pd.Series) -> str:
    """``' to' → ' a' (p 0.31 vs 0.37)``: the rejected draft, the target's token, p of each."""
    return f"{row['piece']!r} → {row['target_top1_piece']!r} (p {row['p']:.2f} vs {row['target_top1_p']:.2f})"


def cause_counts(table: pd.DataFrame, examples: int = EXAMPLES) -> pd.DataFrame:
    """Per lane that drafted (none rejected included) and cause (every cause, in :data:`~spec_core.serve.rejections.CAUSES` order): how many
    rejections, and the first ``examples`` of them as text (columns lane, rejection_cause, count, examples)."""
    rejected = rejections(table)
    rows = []
    for lane in dict.fromkeys(table.loc[table["source"] != "target", "lane"]):  # the lanes that drafted
        mine = rejected[rejected["lane"] == lane]
        for c in CAUSES:
            hits = mine[mine["rejection_cause"] == c]
            rows.append([lane, c, len(hits), [_example(r) for _, r in hits.head(examples).iterrows()]])
    return pd.DataFrame(rows, columns=["lane", "rejection_cause", "count", "examples"])


def live_jsonl(lanes: Lanes, prompt: str, temperature: float) -> str:
    """Every lane's events, one JSON line each, as the analyzer writes them (the prompt id ``live``)."""
    meta = {"prompt_id": LIVE_PROMPT_ID, "category": "live", "prompt": prompt, "temperature": temperature}
    return events_to_jsonl(event_record(e, lane=lane, **meta) for lane, events in lanes.items() for e in events)


def write_live_downloads(
    lanes: Lanes, prompt: str, temperature: float, out_dir: str | Path | None = None
) -> tuple[str, str, pd.DataFrame]:
    """The run's events file and token table in ``out_dir`` (a fresh temporary folder by default): (JSONL path,
    CSV path, the table)."""
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="specscope-live-"))
    jsonl_path, csv_path = out / "specscope_live_rounds.jsonl", out / "specscope_live_tokens.csv"
    jsonl_path.write_text(live_jsonl(lanes, prompt, temperature), encoding="utf-8")
    table = token_table(lanes)
    table.to_csv(csv_path, index=False)
    return str(jsonl_path), str(csv_path), table
