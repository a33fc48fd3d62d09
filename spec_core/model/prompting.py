"""Prompts as token ids: through the target's chat template (the assistant turn opened) when it has one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from spec_core.core.errors import SpecScopeError

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

History = Sequence[tuple[str, str]]  # earlier turns of a conversation: (user, assistant) pairs, oldest first


def chat_ids(tokenizer, prompt: str, history: History | None = None) -> list[int]:
    """The prompt as the target sees it (its chat template with the assistant turn opened), after ``history``."""
    messages = [
        {"role": role, "content": text} for turn in history or () for role, text in zip(("user", "assistant"), turn)
    ]
    ids = tokenizer.apply_chat_template(
        [*messages, {"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding in some versions
        ids = ids["input_ids"]
    return list(ids)


def check_prompt(prompt: object) -> str:
    """``prompt`` when it is text with something in it; else the one-line refusal every entry point gives."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise SpecScopeError("the prompt is empty; type something to continue")
    return prompt


def prompt_ids(pair: ModelPair, prompt: str, chat: bool = True, history: History | None = None) -> list[int]:
    """Token ids of ``prompt``, through the target's chat template when it has one and ``chat`` is on.

    ``history`` (a multi-turn conversation's earlier turns) comes first: rendered as [user_1, assistant_1, ...,
    prompt] by the template, or joined by blank lines without one.
    """
    check_prompt(prompt)
    for turn in history or ():
        if len(turn) != 2 or not all(isinstance(text, str) for text in turn):
            raise SpecScopeError(f"a turn of the history must be a (user, assistant) pair of strings, got {turn!r}")
    tok = pair.tokenizer
    if chat and getattr(tok, "chat_template", None):
        return chat_ids(tok, prompt, history)
    text = "\n\n".join([*(text for turn in history or () for text in turn), prompt])
    return tok(text, add_special_tokens=True)["input_ids"]
