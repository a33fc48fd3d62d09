"""The n-gram index of a growing text: what followed each recent n-gram, kept as tokens arrive.

Prompt lookup (:mod:`.lookup`) and the feature draft's copy pointer (:mod:`.copying`) both match the text's last
tokens against everything before them (Saxena 2023, "Prompt Lookup Decoding"); the index makes a match a few
dictionary look-ups, never a scan of the context, and forgets a round's rejected drafts in as few.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

VOTERS = 16  # the most recent occurrences of an n-gram that vote on its continuation


class NgramIndex:
    """Every n-gram (n in ``min_n..max_n``) of a growing text → the positions that followed it, kept as tokens
    arrive (``extend``): a match costs one dictionary look-up per n, whatever the context's length.

    ``banned``: tokens a copy never proposes (:func:`special_ids`). The prompt's chat template is in the text, so
    without them a copy would draft ``<|im_start|>``, ``assistant``, a newline: a match whose continuation starts
    with one is passed over, a text that ends with one has no match (what follows a template marker is template),
    and a copy stops before the first one (:meth:`copy`)."""

    def __init__(self, min_n: int, max_n: int, banned: frozenset[int] = frozenset()):
        self.min_n, self.max_n, self.banned = min_n, max_n, banned
        self.ids: list[int] = []
        self.after: dict[tuple[int, ...], list[int]] = {}  # n-gram → positions p with ids[p − n : p] == n-gram

    def extend(self, tokens: Sequence[int]) -> None:
        ids, after = self.ids, self.after
        for t in tokens:
            ids.append(int(t))
            end = len(ids)
            for n in range(self.min_n, min(self.max_n, end) + 1):
                after.setdefault(tuple(ids[end - n : end]), []).append(end)

    def truncate(self, length: int) -> None:
        """Forget the tokens after the first ``length`` (a round's rejected drafts), with their n-grams."""
        ids, after = self.ids, self.after
        while len(ids) > max(length, 0):
            end = len(ids)
            for n in range(self.min_n, min(self.max_n, end) + 1):
                key = tuple(ids[end - n : end])
                seen = after[key]
                seen.pop()  # the last entry is this end: n-grams are added in order
                if not seen:
                    del after[key]
            ids.pop()

    def match(self) -> tuple[int, int, bool] | None:
        """The longest n-gram ending the text that occurred before: (n, where its chosen continuation starts,
        whether that continuation followed it more than once), or None. The continuation is the one most of its
        last :data:`VOTERS` occurrences agree on, the most recent among equals."""
        end = len(self.ids)
        if end and self.ids[-1] in self.banned:
            return None
        for n in range(min(self.max_n, end), self.min_n - 1, -1):
            seen = self.after.get(tuple(self.ids[end - n : end]), ())
            starts = [p for p in seen[-VOTERS - 1 :] if p < end and self.ids[p] not in self.banned]  # nor its end
            if not starts:
                continue
            votes = Counter(self.ids[p] for p in starts)
            best = max(votes.values())
            start = next(p for p in reversed(starts) if votes[self.ids[p]] == best)
            return n, start, best > 1
        return None

    def copy(self, start: int, k: int) -> list[int]:
        """Up to ``k`` tokens from ``start``, stopping before the first banned one."""
        out = self.ids[start : start + k]
        cut = next((i for i, t in enumerate(out) if t in self.banned), len(out)) if self.banned else len(out)
        return out[:cut]
