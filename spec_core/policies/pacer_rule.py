"""PACER's stop rule in pure form: its parameters, their parsing, and the draft length it picks from predicted
acceptances known up front (PACER, arXiv 2602.01274: draft in blocks of b, a pre-verification layer scores each
block, stop when a block's mean score falls under a threshold that grows by ρ per block that passes).

:mod:`spec_core.policies.pacer` runs the rule live on a pre-verifier's scores; :mod:`spec_core.policies.pacer_tuning`
and the replays (``analyze policies``) call :func:`replay_length` on recorded rounds. Both sit above this module,
which loads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from spec_core.core.errors import SpecScopeError
from spec_core.policies.base import number


@dataclass(frozen=True)
class PacerParams:
    # Defaults tuned by replaying the rule on held-out training-prompt rounds (`analyze policies --tune`) under
    # two cost models, this machine busy and alone (docs/PACER.md): with a draft whose first token is kept ~45%
    # of the time, one token per block and a demanding threshold win; max = the recorded window.
    block: int = 1  # b: tokens drafted between two pre-verifications (held out, b = 1 beat 2 and 4: docs/PACER.md)
    threshold: float = 0.6  # t_0: the first block passes when its mean predicted acceptance reaches it
    rho: float = 1.1  # ρ: the threshold's growth after each block that passes
    max_len: int = 8  # the draft never exceeds this many tokens
    head: str = ""  # head variant ("" = the paper head, or the draft's only head; "hybrid" = the head that reads
    #   log q; "nopos" = its ablation without position embedding)
    # t tuned for this machine's costs when built (`pacer`, `pacer:t=auto`; spec_core/policies/pacer_tuning.py)
    auto_t: bool = False

    def describe(self) -> str:
        t = "auto" if self.auto_t else f"{self.threshold:g}"
        text = f"pacer:b={self.block},t={t},rho={self.rho:g},max={self.max_len}"
        return text + (f",head={self.head}" if self.head else "")


KEYS = {"b": "block", "t": "threshold", "rho": "rho", "max": "max_len", "head": "head"}


def parse_params(arg: str | None) -> PacerParams:
    """``"b=2,t=0.5"`` → :class:`PacerParams` (validated; loads nothing)."""
    values: dict[str, Any] = {}
    for item in (arg or "").split(","):
        if not item.strip():
            continue
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or key not in KEYS:
            raise SpecScopeError(f"pacer: expected key=value with keys {sorted(KEYS)}, got {item.strip()!r}")
        if KEYS[key] in values:
            raise SpecScopeError(f"pacer: {key} given twice")
        if KEYS[key] == "threshold" and value == "auto":
            values["threshold"], values["auto_t"] = PacerParams.threshold, True
            continue
        kind = {"block": int, "max_len": int, "head": str}.get(KEYS[key], float)
        values[KEYS[key]] = value if kind is str else number(value, kind, f"pacer:{key}")
    values.setdefault("auto_t", "threshold" not in values)  # no t given: tuned for this machine
    p = PacerParams(**values)
    if not 1 <= p.max_len <= 64:
        raise SpecScopeError(f"pacer: max needs 1 <= max <= 64, got {p.max_len}")
    if not 1 <= p.block <= p.max_len:
        raise SpecScopeError(f"pacer: b needs 1 <= b <= max ({p.max_len}), got {p.block}")
    if not 0.0 <= p.threshold <= 1.0:
        raise SpecScopeError(f"pacer: t is a probability threshold, needs 0 <= t <= 1, got {p.threshold}")
    if not 0.5 <= p.rho <= 4.0:
        raise SpecScopeError(f"pacer: rho needs 0.5 <= rho <= 4 (1 = constant threshold), got {p.rho}")
    if p.head and not p.head.replace("-", "").isalnum():
        raise SpecScopeError(f"pacer: head must be a variant name like 'nopos', got {p.head!r}")
    return p


def replay_length(predicted: torch.Tensor, params: PacerParams, budget: int | None = None) -> int:
    """The draft length PACER's stop rule picks, given every token's predicted acceptance ``[γ]`` up front.

    The pure form of :meth:`PacerLength.next_chunk` for replaying recorded rounds (``analyze policies``):
    identical decisions, since a token's prediction depends only on the draft up to it.
    """
    cap = min(params.max_len, predicted.shape[0] if budget is None else budget)
    n, threshold = 0, params.threshold
    while n < cap:
        end = min(n + params.block, cap)
        if end < cap and float(predicted[n:end].mean()) < threshold:
            return end
        n, threshold = end, threshold * params.rho
    return max(cap, 0)
