"""One causal LM plus its KV cache: feed tokens, read logits and hidden states, roll back by cropping."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.cache_utils import CacheLayerMixin, DynamicLayer

PREFILL_WIDE = 16  # a first pass this wide runs on ``prefill_model`` when there is one
MIN_ROOM = 256  # positions a layer's buffer holds at first; it doubles when full


class RoomyLayer(DynamicLayer):
    """A :class:`DynamicLayer` whose keys and values live in a buffer with room to grow.

    transformers' layer concatenates the whole cache at every forward (a copy of all cached positions, 2 × layers
    times a forward); this one writes the new positions in place and hands attention a view of the filled part, so a
    forward's cache work no longer grows with the context. Cropping is the parent's (a shorter view of the same
    buffer); anything that replaces ``keys`` by a new tensor (a tree round's gather) is adopted on the next update.
    """

    room_keys: torch.Tensor | None  # the buffers (set by lazy_initialization, filled by _room_for)
    room_values: torch.Tensor | None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.room_keys = self.room_values = None

    def _room_for(self, needed: int) -> None:
        assert self.keys is not None and self.values is not None  # initialized (update's first call)
        held = self.keys.shape[-2] if self.keys.dim() == 4 else 0
        room = self.room_keys
        if room is not None and self.keys.dim() == 4 and self.keys.data_ptr() == room.data_ptr():  # ours
            if needed <= room.shape[-2]:
                return
        capacity = max(MIN_ROOM, 2 * needed)
        shape = (*self.new_shape[:2], capacity, self.new_shape[3])
        keys = torch.empty(shape, dtype=self.dtype, device=self.device)
        values = torch.empty(shape, dtype=self.dtype, device=self.device)
        if held:
            keys[:, :, :held].copy_(self.keys)
            values[:, :, :held].copy_(self.values)
        self.room_keys, self.room_values = keys, values
        self.keys, self.values = keys[:, :, :held], values[:, :, :held]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.new_shape = key_states.shape
        assert self.keys is not None
        held = self.keys.shape[-2] if self.keys.dim() == 4 else 0
        end = held + key_states.shape[-2]
        self._room_for(end)
        assert self.room_keys is not None and self.room_values is not None  # _room_for made room
        self.room_keys[:, :, held:end].copy_(key_states)
        self.room_values[:, :, held:end].copy_(value_states)
        self.keys, self.values = self.room_keys[:, :, :end], self.room_values[:, :, :end]
        return self.keys, self.values


def roomy_cache(config) -> DynamicCache:
    """A :class:`DynamicCache` of :class:`RoomyLayer` s (for a model with one kind of attention layer)."""
    cache = DynamicCache(config=config)
    if all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [RoomyLayer() for _ in cache.layers]
    return cache


def attention_mask(visible: torch.Tensor, prefix_len: int, model, device: torch.device) -> torch.Tensor:
    """A 4D mask ``[1, 1, Q, prefix_len + K]`` for ``Q`` new positions that all see the first ``prefix_len``
    positions and, among the last ``K``, what ``visible`` ``[Q, K]`` allows; in the format the model's attention
    implementation takes (bool for SDPA, additive float for eager). A token tree's pass uses it (each node sees
    the verified text and its own ancestors)."""
    q = visible.shape[0]
    full = torch.cat([torch.ones(q, prefix_len, dtype=torch.bool), visible], dim=1)[None, None]  # [1, 1, Q, P + K]
    if getattr(model.config, "_attn_implementation", "sdpa") == "eager":
        dtype = next(model.parameters()).dtype
        return torch.zeros(full.shape, dtype=dtype, device=device).masked_fill(~full.to(device), torch.finfo(dtype).min)
    return full.to(device)


@dataclass(frozen=True)
class LMOutput:
    """What one forward over T new tokens returns (batch of one)."""

    logits: torch.Tensor  # [T, V] float32 ([1, V] when only the last position's logits were asked for)
    hidden: torch.Tensor | None  # [T, H] last hidden state (post-norm: lm_head(hidden) == logits); None if off
    layer_hidden: torch.Tensor | None = None  # [T, n_layers_requested, H] when layers were requested


class CachedLM:
    """A Hugging Face causal LM with a growing :class:`DynamicCache` and cheap rollback.

    ``length`` is the number of tokens held in the cache. ``forward`` appends; ``crop`` removes from the end
    through ``DynamicCache.crop`` (never by slicing tensors by hand).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        layers: tuple[int, ...] = (),
        hidden: bool = True,
        prefill_model: torch.nn.Module | None = None,
    ):
        self.model = model
        # a model with the same weights in another arithmetic that runs the first, wide pass (a prompt's prefill)
        # faster: the bf16 original of an int8 target (ModelPair.prefill_target)
        self.prefill_model = prefill_model
        self.layers = layers  # indices into hidden_states (0 = embeddings, i = output of decoder layer i)
        self.hidden = hidden or bool(layers)  # collecting every layer's states costs time: only when read
        self.cache: DynamicCache | None = None
        self.length = 0

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def reset(self) -> None:
        self.cache = roomy_cache(self.model.config)
        self.length = 0

    @torch.inference_mode()
    def forward(
        self,
        tokens: torch.Tensor,
        all_logits: bool = True,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> LMOutput:
        """Feed ``tokens`` ``[T]`` after the cached ones; returns logits and hidden states of these T positions.

        ``all_logits=False`` computes the logits of the last position only (a prefill needs none: the head is
        the costliest matrix of a small model's forward). A token tree passes its nodes' ``positions`` ``[T]``
        and a 4D ``mask`` ``[1, 1, T, cached + T]`` (see :func:`attention_mask`).
        """
        if self.cache is None:
            self.reset()
        model = self.model
        if self.prefill_model is not None and self.length == 0 and tokens.numel() >= PREFILL_WIDE:
            model = self.prefill_model
        out = model(
            input_ids=tokens.view(1, -1).to(self.device),
            past_key_values=self.cache,
            use_cache=True,
            output_hidden_states=self.hidden,
            logits_to_keep=0 if all_logits else 1,
            position_ids=positions.view(1, -1).to(self.device) if positions is not None else None,
            attention_mask=mask,
        )
        self.length += tokens.numel()
        if not self.hidden:
            return LMOutput(logits=out.logits[0].float(), hidden=None)
        states = out.hidden_states  # tuple of (n_layers + 1) tensors [1, T, H]; the last is post-norm
        layer_hidden = torch.stack([states[i][0] for i in self.layers], dim=1) if self.layers else None
        return LMOutput(logits=out.logits[0].float(), hidden=states[-1][0], layer_hidden=layer_hidden)

    def crop(self, length: int) -> None:
        """Keep the first ``length`` cached tokens."""
        if length < self.length:
            assert self.cache is not None  # it holds tokens
            self.cache.crop(length - self.length)  # negative: this transformers version takes -(count to remove)
            self.length = length

    def keep_path(self, prefix_len: int, path: Sequence[int]) -> None:
        """Keep the first ``prefix_len`` cached positions, then positions ``prefix_len + i`` for ``i`` in ``path``
        (a round's accepted drafts, ascending): a crop when ``path`` is ``0..k−1`` (a chain), else a gather."""
        if all(i == k for k, i in enumerate(path)):
            self.crop(prefix_len + len(path))
        else:
            self.gather(torch.cat([torch.arange(prefix_len), prefix_len + torch.tensor(path, dtype=torch.long)]))

    def gather(self, keep: torch.Tensor) -> None:
        """Keep only the cached positions ``keep`` ``[n]`` (ascending): a tree round compacted to its accepted path.

        Cropping cannot do it (the accepted nodes are not a prefix of what the tree pass cached), so each layer's
        keys and values are gathered along the sequence axis.
        """
        keep = keep.to(self.device)
        assert self.cache is not None
        for layer in self.cache.layers:
            # a tree round's layers hold keys and values (a linear-attention state or a dummy layer has none to gather)
            assert isinstance(layer, CacheLayerMixin) and layer.keys is not None and layer.values is not None
            layer.keys = layer.keys.index_select(-2, keep)
            layer.values = layer.values.index_select(-2, keep)
        self.length = int(keep.numel())
