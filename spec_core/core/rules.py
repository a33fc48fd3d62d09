"""Pure math of speculative decoding: warping, acceptance, residuals, ensembles, position weights.

Plain functions of tensors plus an explicit ``torch.Generator``; no model, no global state.
Notation follows the papers: ``p`` is the target distribution (``target_probs`` elsewhere), ``q`` the draft
distribution (``draft_probs``), ``x`` the drafted tokens, ``nu`` an ensemble ν = w·p + (1 − w)·q.

- Lossless rule: Leviathan et al., "Fast Inference from Transformers via Speculative Decoding" (ICML 2023)
  and Chen et al., "Accelerating LLM Decoding with Speculative Sampling" (arXiv 2302.01318).
- Ensemble verification: DIVERSED (arXiv 2604.07622), static ensemble as in Yin et al. (arXiv 2411.00841).
- Position weights: DFlash (arXiv 2602.06036) decay; D-PACE (arXiv 2605.18810) expected-length weights.
"""

from __future__ import annotations

import math

import torch

# ----------------------------------------------------------------------------------------------------------
# Distributions


def warp_probs(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Sampling distribution for each row of ``logits`` (``[..., V]``), as float32 probabilities.

    Temperature 0 gives a one-hot at the argmax (greedy), so one rule serves greedy and sampling alike.
    """
    logits = logits.float()
    if temperature == 0.0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    logits = logits / temperature
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # [..., 1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(-1) - sorted_probs  # mass of strictly more likely tokens
        sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of ``probs`` ``[N, V]`` → ``[N]``; rows that are one-hot are returned as argmax."""
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def total_variation(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """TV(p, q) = ½ Σ |p − q| over the last axis."""
    return 0.5 * (p - q).abs().sum(-1)


def ensemble(p: torch.Tensor, q: torch.Tensor, w: torch.Tensor | float) -> torch.Tensor:
    """ν = w·p + (1 − w)·q. ``w`` is a float or a tensor broadcastable to ``p[..., :1]``."""
    if isinstance(w, torch.Tensor) and w.dim() == p.dim() - 1:
        w = w.unsqueeze(-1)
    return w * p + (1.0 - w) * q


def copy_mix(q: torch.Tensor, token: int, g: float) -> torch.Tensor:
    """A pointer-generator's draft distribution ``(1 − g) · q + g · δ_token`` [V] (See, Liu & Manning, arXiv
    1704.04368): the draft's q with the share g moved onto the copied token."""
    out = q * (1.0 - g)
    out[token] += g
    return out


def copy_mix_log(logq: torch.Tensor, mixed: torch.Tensor, token: int, g: float) -> torch.Tensor:
    """``log`` of :func:`copy_mix`'s ``mixed`` [V], from the draft's log-probabilities ``logq``: log(1 − g) + log q
    off the copied token, its own entry read off ``mixed`` (no elementwise log of the zeros off a trimmed head)."""
    out = logq + math.log1p(-g) if g < 1.0 else torch.full_like(logq, float("-inf"))
    kept = float(mixed[token])
    out[token] = math.log(kept) if kept > 0 else float("-inf")
    return out


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p − q)) per row; where p ≤ q everywhere (p == q), fall back to p itself."""
    r = (p - q).clamp_min(0.0)
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > 0, r / mass.clamp_min(1e-30), p)


# ----------------------------------------------------------------------------------------------------------
# Acceptance


def acceptance_probs(p_x: torch.Tensor, q_x: torch.Tensor, leniency: float = 1.0) -> torch.Tensor:
    """min(1, p(x) / (ℓ·q(x))) for each drafted token. ℓ = 1 is the lossless rule; ℓ < 1 is lenient (lossy)."""
    return (p_x / (leniency * q_x).clamp_min(1e-30)).clamp(max=1.0)


def leading_accepts(accepted_mask: torch.Tensor) -> int:
    """Number of leading ``True`` values in a 1-D boolean tensor (the accepted prefix)."""
    return int(accepted_mask.long().cumprod(0).sum())


def verify_drafts(
    verify_probs: torch.Tensor,  # [γ, V] distribution drafts are checked against (p, or an ensemble ν)
    draft_probs: torch.Tensor,  # [γ, V] q, the distribution each draft token was sampled from
    draft_tokens: torch.Tensor,  # [γ]
    bonus_probs: torch.Tensor,  # [V] target distribution after the last draft
    generator: torch.Generator | None,
    leniency: float = 1.0,
) -> tuple[torch.Tensor, int, int]:
    """Speculative sampling, vectorised over the drafted positions (docs/ALGORITHMS.md §0).

    Returns ``(accept_probs [γ], accepted, next_token)``: the first ``accepted`` drafts are kept, then
    ``next_token`` is the recovered token drawn from norm(max(0, ν − q)) at the first rejection, or the bonus
    token drawn from ``bonus_probs`` when all γ pass. With ``verify_probs = p`` and ``leniency = 1`` the output
    is distributed exactly as the target's.
    """
    gamma = draft_tokens.shape[0]
    idx = torch.arange(gamma, device=draft_tokens.device)
    a = acceptance_probs(verify_probs[idx, draft_tokens], draft_probs[idx, draft_tokens], leniency)  # [γ]
    u = torch.rand(gamma, generator=generator, device=a.device)  # one uniform per drafted token
    accepted = leading_accepts(u < a)
    if accepted < gamma:
        fallback = residual(verify_probs[accepted], draft_probs[accepted])  # [V]
        next_token = int(sample(fallback[None], generator)[0])
    else:
        next_token = int(sample(bonus_probs[None], generator)[0])
    return a, accepted, next_token


def verify_greedy(target_argmax: torch.Tensor, draft_tokens: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """Temperature-0 special case: accept while x_i == argmax p_i; then the target's argmax.

    ``target_argmax`` is ``[γ + 1]``. Identical in outcome to :func:`verify_drafts` on one-hot
    distributions, without building them.
    """
    match = target_argmax[:-1] == draft_tokens  # [γ]
    accepted = leading_accepts(match)
    return match.float(), accepted, int(target_argmax[accepted])


# ----------------------------------------------------------------------------------------------------------
# Per-position training weights for block drafters (docs/ALGORITHMS.md §3)


def uniform_weights(q: torch.Tensor) -> torch.Tensor:
    """Every block position counts the same. ``q``: ``[..., B]`` (only its shape is used)."""
    return torch.ones_like(q)


def decay_gamma(block_size: int) -> float:
    """DFlash's decay constant γ_w for a block of ``block_size`` (anchor + drafted tokens): 4 for B ≤ 8 and 7 for
    B ≥ 16 (arXiv 2602.06036), linear between (B = 12: 5.5), so the training and the lens agree for any B."""
    if block_size <= 8:
        return 4.0
    if block_size >= 16:
        return 7.0
    return 4.0 + 3.0 * (block_size - 8) / 8


def decay_weights(q: torch.Tensor, gamma_w: float) -> torch.Tensor:
    """DFlash's fixed schedule w_k = exp(−(k − 1)/γ_w) for block positions k = 1..B (anchor excluded).

    ``q`` ``[..., B]`` only gives the shape. DFlash (arXiv 2602.06036) uses γ_w = 7 for B = 16 and 4 for B = 8,
    in a weighted mean Σ w·CE / Σ w.
    """
    k = torch.arange(q.shape[-1], device=q.device, dtype=torch.float32)  # k − 1 = 0..B−1
    return torch.exp(-k / gamma_w).expand_as(q).to(q.dtype)


def _smoothed(q: torch.Tensor, alpha: float, mask: torch.Tensor | None) -> torch.Tensor:
    """q̃ = (1 − α)·q + α; positions outside ``mask`` become 1 (a no-op inside prefix products)."""
    smooth = (1.0 - alpha) * q + alpha
    return smooth if mask is None else torch.where(mask, smooth, torch.ones_like(smooth))


def _suffix_sum(x: torch.Tensor) -> torch.Tensor:
    """Σ_{k≥j} x_k over the last axis."""
    return x.flip(-1).cumsum(-1).flip(-1)


def dpace_cumulative_weights(q: torch.Tensor, alpha: float = 0.5, mask: torch.Tensor | None = None) -> torch.Tensor:
    """D-PACE ablation "cumulative only": w_j = P_j = Π_{i≤j} q̃_i (``[..., B]`` → ``[..., B]``)."""
    return torch.cumprod(_smoothed(q, alpha, mask), dim=-1)


def dpace_continuation_weights(q: torch.Tensor, alpha: float = 0.5, mask: torch.Tensor | None = None) -> torch.Tensor:
    """D-PACE ablation "continuation only": w_j = f_j = 1 + Σ_{k>j} Π_{j<i≤k} q̃_i (= Σ_{k≥j} P_k / P_j).

    Computed by the backward recursion f_B = 1, f_j = 1 + q̃_{j+1}·f_{j+1} rather than as a ratio, so it
    stays exact when P_j underflows (α = 0 with tiny q). Masked positions add nothing to the sums.
    """
    smooth = _smoothed(q, alpha, mask)  # [..., B]
    valid = torch.ones_like(smooth) if mask is None else mask.to(smooth.dtype)
    f = torch.empty_like(smooth)
    carry = torch.zeros_like(smooth[..., 0])  # f_{j+1} including only valid positions k > j
    for j in range(smooth.shape[-1] - 1, -1, -1):
        f[..., j] = 1.0 + carry  # the own term (P_j / P_j = 1) plus the continuation
        nxt = valid[..., j] + carry  # Σ over valid k ≥ j of Π_{j<i≤k} q̃_i, seen from j − 1 after × q̃_j
        carry = smooth[..., j] * nxt
    return f


def dpace_weights(q: torch.Tensor, alpha: float = 0.5, mask: torch.Tensor | None = None) -> torch.Tensor:
    """D-PACE weights w_j = P_j · f_j = Σ_{k≥j} Π_{i≤k} q̃_i, with q̃ = (1 − α)·q + α (unnormalised).

    ``q`` ``[..., B]``: the drafter's probability of the gold (target) token at each block position, anchor
    excluded. ``mask`` ``[..., B]`` (bool, optional): positions that exist (inside the sequence); outside it
    q̃ = 1 in the prefix products and the position adds no term to the suffix sums, as in the authors' code
    (``Lucas-TY/D-PACE``, ``_dpace_weight``); multiply the result by ``mask`` before use. Use the result as a
    constant (detached) weight on the unsmoothed cross-entropy −log q_j (D-PACE, arXiv 2605.18810).

    Gradient identity (tested): with S̃ = Σ_k Π_{i≤k} q̃_i, ∂S̃/∂log q_j = (1 − α)·q_j / q̃_j · w_j.
    """
    prefix = dpace_cumulative_weights(q, alpha, mask)  # P_k  [..., B]
    terms = prefix if mask is None else prefix * mask.to(prefix.dtype)
    return _suffix_sum(terms)  # Σ_{k≥j} P_k


def position_weights(
    schedule: str, q: torch.Tensor, alpha: float = 0.5, gamma_w: float = 4.0, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """The per-position weights of a block-drafter loss (``schedule`` as in ``block:LOSS``), ``[..., B]``.

    ``uniform`` and ``decay`` are fixed schedules; ``dpace``, ``dpace-cumulative`` and ``dpace-continuation``
    depend on ``q``. Masked positions get weight 0.
    """
    if schedule == "uniform":
        w = uniform_weights(q)
    elif schedule == "decay":
        w = decay_weights(q, gamma_w)
    elif schedule == "dpace":
        w = dpace_weights(q, alpha, mask)
    elif schedule == "dpace-cumulative":
        w = dpace_cumulative_weights(q, alpha, mask)
    elif schedule == "dpace-continuation":
        w = dpace_continuation_weights(q, alpha, mask)
    else:
        raise ValueError(f"unknown weight schedule {schedule!r}")
    return w if mask is None else w * mask.to(w.dtype)


def expected_accepted_length(q: torch.Tensor) -> torch.Tensor:
    """Surrogate S̃ = Σ_k Π_{i≤k} q_i of the expected accepted length (tail-sum identity), over the last axis."""
    return torch.cumprod(q, dim=-1).sum(-1)


def softmax_at(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """softmax(logits)[i, tokens[i]] for each row, ``[N, V]`` × ``[N]`` → ``[N]``, without the full softmax:
    exp(logit − logsumexp)."""
    logits = logits.float()
    return (logits.gather(-1, tokens[:, None])[:, 0] - torch.logsumexp(logits, -1)).exp()


BLOCK_LOSSES = ("uniform", "decay", "dpace", "dpace-cumulative", "dpace-continuation")  # position_weights' schedules


# ----------------------------------------------------------------------------------------------------------
# Relaxed verification against an ensemble ν = w·p + (1 − w)·q (DIVERSED, arXiv 2604.07622, docs/ALGORITHMS.md §2)


def expected_acceptance(verify_probs: torch.Tensor, draft_probs: torch.Tensor, leniency: float = 1.0) -> torch.Tensor:
    """a = E_{x~q}[min(1, ν(x)/(ℓ·q(x)))] = Σ_x min(q(x), ν(x)/ℓ) per row, ``[..., V]`` → ``[...]``.

    With ℓ = 1 this is 1 − TV(q, ν); for the static ensemble it equals 1 − w·TV(p, q).
    """
    return torch.minimum(draft_probs, verify_probs / leniency).sum(-1).clamp(max=1.0)


def verify_onehot_ensemble(
    target_argmax: torch.Tensor,  # [γ + 1] argmax of p at each position (bonus position last)
    draft_tokens: torch.Tensor,  # [γ] greedy drafts (argmax of q)
    w: torch.Tensor,  # [γ] ensemble weight of the target per drafted position
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, int, int]:
    """Temperature 0, "one-hot" definition: p and q are the one-hots of the greedy rule, ν = w·p + (1 − w)·q.

    A draft equal to the target's argmax is kept; one that differs is kept with probability ν(x)/q(x) = 1 − w;
    at the first rejection the recovered token is norm(max(0, ν − q)) = the target's argmax; bonus = argmax.
    Returns ``(accept_probs [γ], accepted, next_token)``.
    """
    gamma = draft_tokens.shape[0]
    match = target_argmax[:gamma] == draft_tokens  # [γ]
    a = torch.where(match, torch.ones_like(w), 1.0 - w)  # [γ]
    u = torch.rand(gamma, generator=generator, device=a.device)
    accepted = leading_accepts(u < a)
    return a, accepted, int(target_argmax[accepted])


def verify_argmax_ensemble(
    nu: torch.Tensor,  # [γ, V] ensemble of the models' temperature-1 softmax at each drafted position
    draft_tokens: torch.Tensor,  # [γ]
    bonus_token: int,  # the target's argmax after the last draft
) -> tuple[torch.Tensor, int, int]:
    """Temperature 0, "argmax" definition (deterministic): greedy decoding of ν.

    Accept while x_i == argmax ν_i; at the first mismatch the next token is argmax ν_i (the ensemble's own
    greedy choice); when all pass, the target's bonus argmax. w = 1 is the lossless greedy rule (argmax p),
    w = 0 keeps every greedy draft (argmax q).
    """
    nu_argmax = nu.argmax(-1)  # [γ]
    match = nu_argmax == draft_tokens
    accepted = leading_accepts(match)
    next_token = int(nu_argmax[accepted]) if accepted < draft_tokens.shape[0] else int(bonus_token)
    return match.float(), accepted, next_token


def iid_expected_accepted(alpha: float, gamma: int) -> float:
    """Expected accepted drafts of a γ-token round under the i.i.d. assumption (Leviathan et al. 2023):
    Σ_{k=1..γ} α^k = α(1 − α^γ)/(1 − α)."""
    if gamma <= 0:
        return 0.0
    if alpha >= 1.0:
        return float(gamma)
    return alpha * (1.0 - alpha**gamma) / (1.0 - alpha)
