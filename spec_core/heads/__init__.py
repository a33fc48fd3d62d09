"""Small trained networks that score or mix inside a round: PACER's pre-verifier and DIVERSED's ensemble head.

Each head is an ``nn.Module`` with its asset in ``assets/heads`` (safetensors + card, :mod:`spec_core.core.assets`),
matched to the draft it was trained with by that draft's sha256.
"""
