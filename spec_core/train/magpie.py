"""Questions the target writes itself: Magpie (Xu et al., "Magpie: Alignment Data Synthesis from Scratch by
Prompting Aligned LLMs with Nothing", arXiv 2406.08464).

An instruction-tuned model, given only its chat template up to the user's turn (the *pre-query template*, here
SmolLM2's default system turn and ``<|im_start|>user\\n``), continues with a plausible user question and closes
the turn with its end-of-turn token. Sampling that continuation gives prompts in the distribution of the chats the
model was tuned on, without a dataset or the network; the target then answers each question as for any prompt.

Kept: questions that close their turn within ``max_question_tokens``, with MIN_WORDS..MAX_WORDS words, mostly
letters, distinct within the batch and clear of Spec-Bench and the held-out sets
(:func:`spec_core.train.prompts.overlaps_heldout`).
"""

from __future__ import annotations

import re

import torch

from spec_core.train.prompts import overlaps_heldout

MARK = "\x00MAGPIE\x00"  # a stand-in user message, cut off to find where the user's text begins
TEMPERATURE, TOP_P = 1.0, 0.95  # Magpie samples at T = 1; top-p 0.95 trims a 135M model's noisiest tail
MIN_WORDS, MAX_WORDS = 3, 120


def pre_query_ids(tokenizer) -> list[int]:
    """The chat template's tokens up to where the user's message would begin."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": MARK}], tokenize=False)
    return tokenizer(text[: text.index(MARK)], add_special_tokens=False)["input_ids"]


def keep_question(text: str) -> bool:
    words = text.split()
    letters = len(re.findall(r"[A-Za-z]", text))
    return MIN_WORDS <= len(words) <= MAX_WORDS and letters >= 0.6 * len(text) and not overlaps_heldout(text)


@torch.inference_mode()
def magpie_questions(model, tokenizer, n: int, seed: int, max_question_tokens: int = 96) -> list[str]:
    """Up to ``n`` distinct questions sampled from the pre-query template in one batch, seeded by ``seed``
    (fewer when some are dropped; see the module docstring)."""
    prefix = torch.tensor([pre_query_ids(tokenizer)] * n, device=model.device)  # [n, P], no padding needed
    eos = tokenizer.eos_token_id
    torch.manual_seed(seed)
    out = model.generate(
        input_ids=prefix,
        attention_mask=torch.ones_like(prefix),
        max_new_tokens=max_question_tokens,
        do_sample=True,
        temperature=TEMPERATURE,
        top_p=TOP_P,
        top_k=0,
        pad_token_id=eos,
        eos_token_id=eos,
    )
    questions: list[str] = []
    for row in out[:, prefix.shape[1] :].tolist():
        if eos not in row:
            continue  # the turn never closed: cut off mid-question
        text = tokenizer.decode(row[: row.index(eos)], skip_special_tokens=True).strip()
        if keep_question(text) and text not in questions:
            questions.append(text)
    return questions
