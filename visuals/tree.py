"""The token-tree view: one round's tree, drawn level by level (EAGLE-2, arXiv 2406.16858).

A tree round (method ``tree``) drafts several candidates per position and verifies all of them in one target
forward. The figure reads ``RoundEvent.tree`` (a :class:`~spec_core.core.types.TreeRound`): node tokens and pieces,
parents, depths, the draft's probability q of each node given its parent, the target's probability p, the
accepted path and the children the verifier tried. Green = the accepted path; vermillion = a child the target
tried and rejected; grey = drafted but never reached. Hover a node for its q, p and acceptance probability.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from spec_core.core.types import RoundEvent
from spec_core.drafters import TreeDraft
from spec_core.engine.methods import spec_of
from visuals.plots import Lanes, base_layout
from visuals.style import OKABE_ITO
from visuals.views import ROUND_VIEWS, View, register_view


def is_tree(method: str) -> bool:
    """Whether ``method`` drafts a token tree (its drafter's own word, not its name's letters)."""
    return spec_of(method).is_tree


def layout(parents: Sequence[int]) -> list[float]:
    """A vertical slot for every node: leaves in depth-first order, a parent centred over its children."""
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)
    y: dict[int, float] = {}
    next_leaf = [0.0]

    def place(node: int) -> float:
        kids = children.get(node, [])
        if not kids:
            y[node] = next_leaf[0]
            next_leaf[0] += 1.0
        else:
            spots = [place(k) for k in kids]
            y[node] = sum(spots) / len(spots)
        return y[node]

    for root_child in children.get(-1, []):
        place(root_child)
    return [-y[i] for i in range(len(parents))]


def tree_figure(event: RoundEvent | None, title: str = "Token tree of one round") -> go.Figure:
    """The tree of one round: the pending token on the left, one column per depth."""
    fig = go.Figure()
    tree = event.tree if event is not None else None
    if tree is None or not tree.pieces:  # no tree round, or one run without display (no per-node numbers)
        return base_layout(
            fig,
            title,
            "depth (tokens after the verified text)",
            "",
            empty=True,
            empty_text="no tree round yet (method `tree`)",
        )
    parents, depths, pieces = tree.parents, tree.depths, tree.pieces
    ys = layout(parents)
    root_y = sum(ys[i] for i, p in enumerate(parents) if p < 0) / max(1, sum(p < 0 for p in parents))
    path, tried = set(tree.path), dict(tree.tried)
    ex, ey = [], []
    for node, parent in enumerate(parents):  # edges, parent → node
        ex += [depths[parent] if parent >= 0 else 0, depths[node], None]
        ey += [ys[parent] if parent >= 0 else root_y, ys[node], None]
    fig.add_trace(
        go.Scatter(x=ex, y=ey, mode="lines", line={"color": "#bbbbbb", "width": 1}, hoverinfo="skip", showlegend=False)
    )
    groups = {
        "accepted path": ([n for n in range(len(parents)) if n in path], OKABE_ITO["green"]),
        "tried, rejected": ([n for n in tried if n not in path], OKABE_ITO["vermillion"]),
        "drafted, not reached": ([n for n in range(len(parents)) if n not in tried and n not in path], "#999999"),
    }
    labelled = path | set(tried)  # only the nodes the walk reached carry a label; the rest on hover
    for label, (nodes, colour) in groups.items():
        fig.add_trace(
            go.Scatter(
                x=[depths[n] for n in nodes],
                y=[ys[n] for n in nodes],
                mode="markers+text",
                name=label,
                marker={
                    "size": 12 if len(parents) > 16 else 14,
                    "color": colour,
                    "line": {"width": 1, "color": "white"},
                },
                text=[node_label(pieces[n]) if n in labelled else "" for n in nodes],
                textposition="middle right",
                textfont={"size": 11},
                hovertext=[node_label(pieces[n], 24) for n in nodes],
                customdata=[[tree.draft_probs[n], tree.target_probs[n], tried.get(n)] for n in nodes],
                hovertemplate="%{hovertext}<br>q (draft, given its parent) = %{customdata[0]:.3f}<br>"
                "p (target) = %{customdata[1]:.3f}<br>acceptance probability = %{customdata[2]}"
                "<extra>" + label + "</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[0],
            y=[root_y],
            mode="markers+text",
            name="verified text so far (the root)",
            marker={"size": 16, "color": OKABE_ITO["blue"], "symbol": "square"},
            text=["root"],
            textposition="bottom center",
            hoverinfo="skip",
        )
    )
    kept = len(tree.path)
    leaves = max(1.0, -min(ys) + 1)
    base_layout(
        fig,
        f"{title}: {len(parents)} nodes, {kept} kept + 1 from the target",
        "depth",
        "",
        note="labels on the nodes the target tried; hover any node for its token, p and q",
    )
    fig.update_layout(height=int(min(900, max(360, 110 + 22 * leaves))))  # a row per leaf, labels never stacked
    fig.update_xaxes(range=[-0.6, max(depths) + 1.1], dtick=1)  # room for the root and the deepest labels
    fig.update_yaxes(showticklabels=False, zeroline=False, showgrid=False)
    return fig


def node_label(piece: str, width: int = 10) -> str:
    """A node's token as a short label (quotes dropped, whitespace shown)."""
    text = repr(piece)[1:-1].replace(" ", "·")
    return text if len(text) <= width else text[: width - 1] + "…"


def last_tree_figure(lanes: Lanes) -> go.Figure:
    """The most recent tree round of the first tree lane."""
    for method, events in lanes.items():
        if is_tree(method):
            trees = [e for e in events if e.tree is not None]
            return tree_figure(trees[-1] if trees else None, f"{method}: the last round's tree")
    return tree_figure(None)


def round_tree_figure(lanes: Lanes, round_index: int) -> go.Figure:
    """The tree of round ``round_index`` (the step-through's choice)."""
    ((method, events),) = lanes.items()
    event = events[min(round_index, len(events) - 1)] if events else None
    return tree_figure(event, f"{method}: round {round_index}'s tree")


register_view(
    View(
        "tree_round",
        "Token tree: one round",
        "Several candidates per position, verified in one target pass. The target walks down the green path; "
        "a red node is a candidate it tried and rejected before moving to its sibling.",
        last_tree_figure,
        prefixes=(TreeDraft.prefix,),
        with_baselines=False,
    )
)
ROUND_VIEWS["tree_round"] = round_tree_figure  # the step-through can walk a tree round
