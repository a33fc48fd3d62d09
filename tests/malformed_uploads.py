"""Malformed files for the app's three loaders, shared by the fast loader tests and the browser test.

Each case is (loader, file name, content): ``events`` is the analyzer's "Load a saved events file" (JSONL),
``record`` the Playground's "Load a record (.json) / events (.jsonl)", ``sweep`` the DIVERSED panel's "Load a
pareto CSV". Every one must end in one readable message and leave the page working. ``HUGE`` is built on
demand (a file over the upload limit is written only where a test needs it).
"""

from __future__ import annotations

import json

EVENT = {  # one valid round of an events file, to break in the cases below
    "prompt_id": "p1",
    "prompt": "hi",
    "category": "chat",
    "temperature": 0.0,
    "index": 0,
    "method": "ar",
    "context_len": 3,
    "draft_tokens": [],
    "draft_pieces": [],
    "draft_probs": [],
    "target_probs": [],
    "accept_probs": [],
    "gold_draft_probs": [],
    "accepted": 0,
    "next_token": 5,
    "next_piece": "x",
    "next_kind": "target",
    "emitted": [5],
    "draft_s": 0.0,
    "verify_s": 0.01,
}
GOOD_EVENTS = json.dumps(EVENT) + "\n"
SWEEP_HEADER = "method,param,acceptance_rate,quality,tau\n"

CASES: list[tuple[str, str, bytes]] = [
    # the analyzer's events loader
    ("events", "empty.jsonl", b""),
    ("events", "blank_lines.jsonl", b"\n\n   \n"),
    ("events", "truncated.jsonl", GOOD_EVENTS.encode()[:-40]),
    ("events", "a_list.jsonl", b"[1, 2, 3]\n"),
    ("events", "prompt_set.jsonl", b'{"id": "a", "category": "chat", "prompt": "hi"}\n'),  # wrong columns
    ("events", "wrong_types.jsonl", json.dumps({**EVENT, "index": "zero", "emitted": "x"}).encode() + b"\n"),
    ("events", "binary.jsonl", bytes(range(256)) * 4),
    ("events", "utf16.jsonl", GOOD_EVENTS.encode("utf-16")),
    (  # a Live run's rejection record whose top-k lists do not line up
        "events",
        "bad_rejection.jsonl",
        json.dumps({**EVENT, "rejection": {"position": 0, "target_ids": [1, 2], "target_pieces": ["a"]}}).encode()
        + b"\n",
    ),
    # the Playground's record loader
    ("record", "empty.json", b""),
    ("record", "truncated.json", b'{"kind": "specscope-playground-record", "prompt": "hi", "tok'),
    ("record", "other_kind.json", b'{"kind": "something-else", "prompt": "hi"}'),
    (
        "record",
        "bad_shapes.json",
        json.dumps(
            {
                "kind": "specscope-playground-record",
                "prompt": "hi",
                "prompt_ids": [1],
                "tokens": [1, 2],
                "max_new_tokens": 4,
                "draft_tokens": [1, 2, 3],
                "draft_probs": [0.5],
                "match": [1],
                "predicted": {},
            }
        ).encode(),
    ),
    ("record", "binary.json", bytes(range(256)) * 4),
    ("record", "latin1.json", '{"kind": "specscope-playground-record", "prompt": "café"}'.encode("latin-1")),
    ("record", "empty_events.jsonl", b"\n"),
    # the DIVERSED panel's pareto CSV loader
    ("sweep", "empty.csv", b""),
    ("sweep", "header_only.csv", SWEEP_HEADER.encode()),
    ("sweep", "wrong_columns.csv", b"name,score\nstatic,1\nlossless,2\n"),
    ("sweep", "not_numbers.csv", (SWEEP_HEADER + "static,0,high,good,1\nstatic,1,low,bad,1\n").encode()),
    ("sweep", "one_static_row.csv", (SWEEP_HEADER + "static,0,0.9,0.2,3\nlossless,,0.3,0.4,1.5\n").encode()),
    ("sweep", "ragged.csv", (SWEEP_HEADER + 'static,0,0.9,0.2,3,extra,more\nstatic,"1,0.3\n').encode()),
    ("sweep", "binary.csv", bytes(range(256)) * 4),
    ("sweep", "utf16.csv", (SWEEP_HEADER + "static,0,0.9,0.2,3\nstatic,1,0.3,0.4,1.5\n").encode("utf-16")),
]


def write_case(folder, name: str, content: bytes):
    path = folder / name
    path.write_bytes(content)
    return path
