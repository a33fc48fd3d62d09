"""The target's features of token-id sequences, recomputed online: what the first shard format stored.

EAGLE-style drafts read the target's last hidden state (post-norm, so ``lm_head`` of it gives the teacher's
logits); EAGLE-3-style and block drafters also read the hidden states of some layers (``TARGET_LAYERS``). The
first shard format stored both, 6.9 KB a token in bf16; a token-id shard stores neither and the trainers call
:func:`target_features` on each batch, one right-padded prefill of the target, as SpecForge and EAGLE-3 train
(Li et al., EAGLE-3, arXiv 2503.01840). A causal model's state at position t depends on tokens 0..t only, so
right padding changes nothing before it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch


@torch.inference_mode()
def target_features(
    model, sequences: Sequence[Sequence[int] | torch.Tensor], layers: Sequence[int] = (), max_len: int | None = None
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per sequence, (last hidden state ``[T, H]``, hidden states of ``layers`` ``[T, L, H]``) in ``model``'s
    dtype, from one right-padded forward; ``max_len`` keeps only each sequence's first positions."""
    seqs = [torch.as_tensor(s, dtype=torch.long)[:max_len] for s in sequences]
    lengths = [len(s) for s in seqs]
    width = max(lengths)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)  # [B, W]
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, : len(s)], mask[b, : len(s)] = s, 1
    out = model.model(
        input_ids=ids.to(model.device), attention_mask=mask.to(model.device), output_hidden_states=bool(layers)
    )
    last = out.last_hidden_state  # [B, W, H] post-norm
    per_layer = (
        torch.stack([out.hidden_states[i] for i in layers], dim=2) if layers else last[:, :, None, :0]
    )  # [B, W, L, H]
    return [last[b, :n].cpu() for b, n in enumerate(lengths)], [per_layer[b, :n].cpu() for b, n in enumerate(lengths)]


class OnlineFeatures:
    """The trainers' source of target features for token-id shards.

    ``model`` is the target; the features are computed by a copy in ``dtype`` (bfloat16: what the first format
    stored, written by the bfloat16 target) and returned in bfloat16, as stored, ``batch_size`` sequences per
    prefill.
    """

    def __init__(self, model, layers: Sequence[int] = (), dtype: torch.dtype = torch.bfloat16, batch_size: int = 8):
        same = next(model.parameters()).dtype == dtype
        self.model = (model if same else copy.deepcopy(model).to(dtype)).eval()
        self.layers, self.batch_size = tuple(layers), batch_size

    def __call__(
        self, sequences: Sequence[torch.Tensor], max_len: int | None = None
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """([T, H] bf16, [T, L, H] bf16) per sequence (``L`` = 0 without layers)."""
        last: list[torch.Tensor] = []
        per_layer: list[torch.Tensor] = []
        for i in range(0, len(sequences), self.batch_size):
            h, lh = target_features(self.model, sequences[i : i + self.batch_size], self.layers, max_len)
            last += [x.to(torch.bfloat16) for x in h]
            per_layer += [x.to(torch.bfloat16) for x in lh]
        return last, per_layer
