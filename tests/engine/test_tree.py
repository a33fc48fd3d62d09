"""Token trees (EAGLE-2, arXiv 2406.16858): the tree mask, cache compaction, and losslessness (greedy and sampled)."""

from __future__ import annotations

import pytest
import torch
from conftest import make_tiny_pair
from test_lossless_sampling import exact_first_two

from spec_core.core import rules
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.drafters.base import DraftChunk, RoundDraft, ancestor_matrix
from spec_core.drafters.tree import TreeShape
from spec_core.engine.loop import Generation, generate
from spec_core.engine.methods import parse_method, split_methods
from spec_core.model.cached_lm import CachedLM, attention_mask

PROMPT = "speculative decoding"


def _tree(parents: list[int], tokens: list[int]) -> RoundDraft:
    draft = RoundDraft()
    n = len(parents)
    draft.add(DraftChunk(tokens, None, [0.5] * n, [torch.zeros(2)] * n, [torch.zeros(16)] * n, 1, parents))
    return draft


def test_ancestor_matrix():
    a = ancestor_matrix(torch.tensor([-1, -1, 0, 0, 2]))
    assert a[4].tolist() == [True, False, True, False, True]  # 4 → 2 → 0
    assert a[1].tolist() == [False, True, False, False, False]


@pytest.mark.parametrize("first_round", [False, True])
def test_tree_mask_gives_each_path_its_chain_logits(first_round):
    """One forward over [pending, nodes] with the tree mask = each root-to-node path run as a plain chain."""
    pair = make_tiny_pair(vocab=16)
    prefix = [3, 1, 4, 1, 5, 9]
    tree = _tree([-1, -1, 0, 0, 1, 2, 2, 4], [2, 7, 1, 8, 2, 8, 1, 8])
    lm = CachedLM(pair.target)
    lm.reset()
    cached = prefix if first_round else prefix[:-1]  # the first round's pending token is already cached
    lm.forward(torch.tensor(cached))
    tokens, positions, visible = tree.target_inputs(prefix[-1], len(prefix) - 1)
    skip = 1 if first_round else 0
    mask = attention_mask(visible[skip:, skip:], lm.length, pair.target, torch.device("cpu"))
    out = lm.forward(tokens[skip:], positions=positions[skip:], mask=mask).logits  # [N + 1 − skip, V]
    with torch.no_grad():
        for i in range(len(tree)):
            path, node = [], i
            while node >= 0:
                path.insert(0, tree.tokens[node])
                node = tree.parents[node]
            chain = pair.target(torch.tensor([prefix + path])).logits[0, -1]
            assert torch.allclose(out[1 + i - skip], chain, atol=1e-4), i


def test_a_chain_is_the_one_path_tree():
    """A chain's draft is laid out like a tree whose every node has one child: same tokens and depths, and a chain
    after which a tree is drafted keeps its own parents."""
    chain, tree = RoundDraft(), _tree([-1, 0, 1], [5, 6, 7])
    chain.add(DraftChunk([5, 6, 7], None, [0.5] * 3, [torch.zeros(2)] * 3, [torch.zeros(16)] * 3, 3))
    assert chain.parents is None and chain.depths() == tree.depths() == [1, 2, 3]
    assert chain.line((0,)) == range(3) and tree.line((0,)) == [0, 1]  # a tree shows the first rejected child
    assert chain.children(1) == tree.children(1) == [2] and chain.children(2) == tree.children(2) == []
    _, positions, visible = tree.target_inputs(9, 10)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    assert positions.tolist() == [10, 11, 12, 13] and torch.equal(visible, causal)
    assert chain.target_inputs(9, 10)[1:] == (None, None)  # a chain needs neither: causal at consecutive positions
    chain.add(DraftChunk([8, 9], None, [0.5] * 2, [torch.zeros(2)] * 2, [torch.zeros(16)] * 2, 2, [-1, -1]))
    assert chain.parents == [-1, 0, 1, 2, 2] and chain.forwards == 5


def test_shape_parsing():
    assert TreeShape.parse("nodes=8,topk=2") == TreeShape(nodes=8, depth=4, topk=2)
    for bad in ["nodes=0", "depth=x", "width=3", "topk=99"]:
        with pytest.raises(SpecScopeError, match="tree"):
            TreeShape.parse(bad)
    for bad in ["tree+fixed:3", "tree:nodes=0", "tree+static:0.5"]:
        with pytest.raises(SpecScopeError):
            parse_method(bad)
    assert parse_method("tree:depth=3").drafter.params == TreeShape(depth=3)  # parsed once, where the name enters
    assert split_methods("ar, pacer:b=2,t=0.5,tree:nodes=16,depth=5,fixed:2") == [
        "ar",
        "pacer:b=2,t=0.5",
        "tree:nodes=16,depth=5",
        "fixed:2",
    ]


def _branches_deep(events) -> bool:
    """Some round's tree has a node with two or more children below the first level."""
    for e in events:
        parents = list(e.tree.parents) if e.tree is not None else []
        counts = {p: parents.count(p) for p in parents if p >= 0}
        if any(c >= 2 for c in counts.values()):
            return True
    return False


@pytest.mark.parametrize("design", ["feature", "standalone"])
@pytest.mark.parametrize("method", ["tree", "tree:nodes=6,depth=3,topk=2", "tree:nodes=40,depth=8,topk=4"])
def test_greedy_tree_equals_ar(method, design):
    pair = make_tiny_pair(draft=design)
    ar = generate(pair, PROMPT, "ar", max_new_tokens=40)
    res = generate(pair, PROMPT, method, max_new_tokens=40)
    assert res.token_ids == ar.token_ids
    assert _branches_deep(res.events) and res.stats.target_forwards < ar.stats.target_forwards
    for e in res.events:  # the event's chain view agrees with its tree; width and draft forwards are the tree's
        path = e.tree.path if e.tree is not None else ()
        assert e.accepted == len(path) and e.emitted[: e.accepted] == e.draft_tokens[: e.accepted]
        if e.tree is not None:
            assert (
                e.verify_width == e.tree.size + 1
                and e.tree.depth <= e.draft_forwards <= TreeShape.parse(method.partition(":")[2] or None).depth
            )
            assert e.tree.size >= e.draft_len  # the line shows the path and at most one rejected child


def test_cache_compaction_equals_a_fresh_prefill():
    pair = make_tiny_pair(draft="feature")
    run = Generation(pair, PROMPT, "tree:nodes=12,depth=4,topk=3", 30, SamplingConfig(temperature=1.0, seed=4))
    for _ in run.rounds():
        ids = list(run.prompt_ids) + list(run.new_tokens)
        fresh = CachedLM(pair.target)
        fresh.reset()
        fresh.forward(torch.tensor(ids[:-1]))
        assert run.target_lm.length == len(ids) - 1
        for a, b in zip(run.target_lm.cache.layers, fresh.cache.layers):
            assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)
        d = run.drafter  # the draft keeps only pairs built from verified features
        assert d.cache.get_seq_length() == d.cached <= len(ids) - 2


def test_standalone_tree_draft_cache_is_compacted_to_the_accepted_text():
    """The standalone draft's own cache after a tree round: the verified text and the accepted path's expanded
    nodes, gathered (not cropped), equal to a fresh prefill of that text."""
    pair = make_tiny_pair(draft="standalone")
    run = Generation(pair, PROMPT, "tree:nodes=12,depth=4,topk=3", 30, SamplingConfig(temperature=1.0, seed=4))
    kept_nodes = 0
    for event in run.rounds():
        ids = list(run.prompt_ids) + list(run.new_tokens)
        lm = run.drafter.lm
        assert lm.length <= len(ids) - 1
        fresh = CachedLM(pair.draft)
        fresh.reset()
        fresh.forward(torch.tensor(ids[: lm.length]))
        for a, b in zip(lm.cache.layers, fresh.cache.layers):
            assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)
        kept_nodes += max(0, lm.length - (len(ids) - 1 - len(event.tree.path if event.tree is not None else ())))
    assert kept_nodes > 0  # some accepted tree nodes were kept in the cache rather than run again


VOCAB, DRAWS = 6, 1000  # sampling noise at 1000 draws: TV about 0.04 (measured 0.046 at 800; 0.02 at 4000)


def test_sampled_tree_matches_the_target_distribution():
    """The first two tokens over many seeds are distributed as the target's (trees that branch at two depths)."""
    pair = make_tiny_pair(vocab=VOCAB, draft="feature", target_seed=3, draft_seed=11)
    prompt_ids = Generation(pair, "lossless", "ar", 2).prompt_ids
    exact = exact_first_two(pair, prompt_ids)
    counts, rejected, walked = torch.zeros(VOCAB, VOCAB), 0, 0
    for seed in range(DRAWS):
        run = Generation(pair, "lossless", "tree:nodes=8,depth=2,topk=4", 3, SamplingConfig(temperature=1.0, seed=seed))
        events = list(run.rounds())
        t1, t2 = run.result().token_ids[:2]
        counts[t1, t2] += 1
        tree = events[0].tree
        rejected += any(n not in tree.path for n, _ in tree.tried)  # p′ lost a candidate: residual step
        walked += len(tree.path) >= 1
    tv = float(rules.total_variation((counts / DRAWS).flatten(), exact.flatten()))
    assert tv < 0.08, tv
    assert rejected >= DRAWS // 20 and walked >= DRAWS // 20, (rejected, walked)  # both branches of the rule ran


def test_tree_view_draws_the_round_as_data():
    from visuals import views
    from visuals.tree import last_tree_figure

    pair = make_tiny_pair(draft="feature")
    res = generate(pair, PROMPT, "tree:nodes=10,depth=4,topk=3", max_new_tokens=12)
    assert "tree_round" in [v.key for v in views.views_for(["tree", "ar"])]
    fig = last_tree_figure({"tree": list(res.events)})
    traces = {t.name: t for t in fig.data if t.name}
    last = [e for e in res.events if e.tree is not None][-1].tree
    assert len(traces["accepted path"].x) == len(last.path)
    drawn = sum(len(traces[k].x) for k in ("accepted path", "tried, rejected", "drafted, not reached"))
    assert drawn == last.size  # every node once, in exactly one group


def test_tree_shape_analysis_prices_every_shape():
    """``analyze trees``: the grid's every combination, τ from greedy runs (identical text to ``ar``), and both
    speed columns priced from measured costs."""
    from spec_core.analysis import trees
    from spec_core.analysis.costs import measure_costs

    shapes = trees.parse_grid("nodes=2,6;depth=3;topk=1,3")
    assert [(s.nodes, s.topk) for s in shapes] == [(2, 1), (2, 3), (6, 1), (6, 3)]
    for bad, msg in [
        ("nodes=a", "integers"),
        ("width=3", "unknown axis"),
        ("nodes=", "no values"),
        ("nodes=0", "nodes"),
    ]:
        with pytest.raises(SpecScopeError, match=msg):
            trees.parse_grid(bad)
    pair = make_tiny_pair(vocab=16, draft="feature")
    table, events = trees.run_shapes(pair, shapes, [PROMPT, "tree shapes"], 12)
    assert len(table) == 4 and (table["tau"] >= 1).all() and (table["rounds"] > 0).all()
    assert all(sum(len(e.emitted) for e in evs) == 24 for evs in events.values())
    costs = measure_costs(pair, {"feature": pair.draft}, repeats=2, context=8, widths=(2, 3, 7))
    assert set(costs.loc[costs["what"] == "target forward", "tokens"]) == {1, 2, 3, 7}
    priced = trees.price(table, events, costs, "feature")
    assert (priced["predicted_speedup"] > 0).all() and (priced["free_pass_speedup"] > 0).all()


def test_tree_events_survive_a_jsonl_round_trip(tmp_path):
    from spec_core.engine.session import event_from_record, event_record, events_to_jsonl, read_events_jsonl

    pair = make_tiny_pair(vocab=16, draft="feature")
    events = generate(pair, PROMPT, "tree:nodes=6,depth=3,topk=3", max_new_tokens=10).events
    assert all(e.tree is not None for e in events[:-1])
    assert [event_from_record(event_record(e)) for e in events] == list(events)
    path = tmp_path / "events.jsonl"
    path.write_text(events_to_jsonl(event_record(e) for e in events))
    assert [e for _, e in read_events_jsonl(path)] == list(events)  # JSON's lists come back as the record's tuples


def test_tree_rounds_without_display_keep_the_walk_and_skip_the_numbers():
    pair = make_tiny_pair(vocab=16, draft="feature")
    runs = {
        d: Generation(pair, PROMPT, "tree:nodes=6,depth=3,topk=3", 20, SamplingConfig(), display=d)
        for d in (True, False)
    }
    events = {d: list(r.rounds()) for d, r in runs.items()}
    assert runs[True].new_tokens == runs[False].new_tokens
    for shown, bare in zip(events[True], events[False]):
        walk = ("tokens", "parents", "depths", "path", "tried")
        assert [getattr(bare.tree, k) for k in walk] == [getattr(shown.tree, k) for k in walk]
        assert bare.tree.pieces == bare.tree.target_probs == bare.tree.draft_probs == () and bare.next_prob is None
        assert len(shown.tree.pieces) == len(shown.tree.target_probs) == shown.tree.size
        assert bare.draft_probs == pytest.approx(shown.draft_probs) and bare.target_probs == ()
        assert len(shown.target_probs) == len(shown.draft_tokens) and shown.next_prob is not None
