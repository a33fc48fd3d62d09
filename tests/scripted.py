"""Scripted rounds for the tests that read events without running a model (cost stories, verdicts, views)."""

from __future__ import annotations

from spec_core.core.types import RoundEvent


def scripted_round(
    index: int,
    method: str,
    drafted: int,
    accepted: int,
    *,
    draft_s: float,
    verify_s: float,
    target_s: float,
    engine_s: float = 0.0,
) -> RoundEvent:
    """One round of ``drafted`` drafts at p = q = 0.5 of which the first ``accepted`` were kept, with the given
    clock (a round with no draft is a plain step: its token is the target's)."""
    return RoundEvent(
        index=index,
        method=method,
        context_len=10,
        draft_tokens=tuple(range(drafted)),
        draft_pieces=("x",) * drafted,
        draft_probs=(0.5,) * drafted,
        target_probs=(0.5,) * drafted,
        accept_probs=(0.5,) * drafted,
        gold_draft_probs=(0.5,) * drafted,
        accepted=accepted,
        next_token=1,
        next_piece="y",
        next_kind="target" if not drafted else "recovered",
        emitted=tuple(range(accepted + 1)),
        draft_s=draft_s,
        verify_s=verify_s,
        target_s=target_s,
        engine_s=engine_s,
    )
