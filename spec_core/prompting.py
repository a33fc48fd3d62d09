"""Prompts as token ids: through the target's chat template (the assistant turn opened) when it has one."""

from __future__ import annotations

from spec_core.errors import SpecScopeError


def chat_ids(tokenizer, prompt: str) -> list[int]:
    """The prompt as the target sees it (its chat template with the assistant turn opened)."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding in some versions
        ids = ids["input_ids"]
    return list(ids)


def prompt_ids(pair, prompt: str, chat: bool = True) -> list[int]:
    """Token ids of ``prompt``, through the target's chat template when it has one and ``chat`` is on."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise SpecScopeError("the prompt is empty; type something to continue")
    tok = pair.tokenizer
    if chat and getattr(tok, "chat_template", None):
        return chat_ids(tok, prompt)
    return tok(prompt, add_special_tokens=True)["input_ids"]
