"""Multi-fidelity rungs, MCTS parent selection, the mixture of harnesses by budget."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from videvolve.graph import Context, build_graph
from videvolve.mixture import tier_for
from videvolve.nodes.solve import pick_parent
from videvolve.skill_library.harness import seed_path
from videvolve.tasks import Task
from videvolve.validation import rungs


def tasks(n: int) -> list[Task]:
    return [Task(id=f"t{i}", video_id=f"v{i}", video="v.mp4", kind="mcq", question="q", options=["a", "b"],
                 answer="A", duration=10) for i in range(n)]


def test_rungs_are_nested_and_seeded():
    sel = tasks(40)
    ladder = rungs(sel, [0.25, 0.5, 1.0], seed=3, mode="multi-fidelity")
    assert [len(r) for r in ladder] == [10, 20, 40]
    assert {t.id for t in ladder[0]} <= {t.id for t in ladder[1]} <= {t.id for t in ladder[2]}
    assert ladder == rungs(sel, [0.25, 0.5, 1.0], seed=3, mode="multi-fidelity")
    assert [t.id for t in ladder[0]] != [t.id for t in rungs(sel, [0.25, 0.5, 1.0], 4, "multi-fidelity")[0]]
    assert rungs(sel, [0.25, 0.5, 1.0], seed=3, mode="full") == [sel]


def test_uct_prefers_unvisited_then_balances():
    ctx = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", search="mcts", uct_c=0.5)
    tree = {"root": {"parent": None, "visits": 3, "value": 1.5, "score": 0.5, "accepted": True},
            "a": {"parent": "root", "visits": 2, "value": 1.4, "score": 0.7, "accepted": True},
            "b": {"parent": "root", "visits": 0, "value": 0.0, "score": 0.6, "accepted": True},
            "c": {"parent": "root", "visits": 0, "value": 0.0, "score": 0.9, "accepted": False}}
    state: Any = {"tree": tree, "incumbent": "a"}
    assert pick_parent(state, ctx) == "b"  # unvisited and accepted (c was rejected)
    tree["b"]["visits"], tree["b"]["value"] = 1, 0.3
    assert pick_parent(state, ctx) == "a"  # now the best mean value wins
    tree["a"]["exhausted"] = True
    assert pick_parent(state, ctx) == "b"
    chain = ctx.model_copy(update={"search": "chain"})
    assert pick_parent(state, chain) == "a"  # chain search always revises the incumbent


def test_tier_for_budget():
    mixture = {"tiers": {"16": {"version": "v16"}, "64": {"version": "v64"}, "128": {"version": "v128"}}}
    assert tier_for(mixture, 100) == (64, "v64") and tier_for(mixture, 8) == (16, "v16")
    assert tier_for(mixture, None) == (128, "v128") and tier_for(mixture, 128) == (128, "v128")


@pytest.fixture()
def seed(tmp_path: Path) -> Path:
    d = tmp_path / "uniform16"
    shutil.copytree(seed_path("uniform"), d)
    (d / "config.toml").write_text("n_frames = 16\nmax_side = 160\n")
    return d


def test_mcts_with_multi_fidelity_and_a_mixture(small_world, tmp_path: Path, seed: Path):
    run = tmp_path / "run"
    ctx = Context(run_dir=str(run), run_id="run", tasks=str(small_world.tasks_path), seed_harness=str(seed),
                  memory=str(tmp_path / "memory"), embedder="hashing", cache=str(tmp_path / "c.sqlite"), batch=4,
                  iterations=2, search="mcts", children=2, validation="multi-fidelity", budgets=[4, 8, 16])
    from videvolve.graph.driver import evolve

    final = evolve(ctx)
    history = final["history"]
    assert final["iteration"] == 2 and len(history) >= 3  # two candidates in at least one iteration
    assert any("rung" in h.get("reason", "") or h.get("rungs") for h in history)
    tree = final["tree"]
    assert sum(1 for s in tree.values() if s["parent"] is not None) >= 2
    assert tree[final["incumbent"]]["accepted"]
    mixture = json.loads((run / "mixture.json").read_text())
    assert set(mixture["tiers"]) == {"4", "8", "16"}
    for cap, tier in mixture["tiers"].items():
        assert tier["frames"] <= int(cap) and tier["version"] in tier["candidates"]
    from videvolve.skill_library.harness import resolve_harness

    assert resolve_harness(run, 6).name == mixture["tiers"]["4"]["version"]
    assert resolve_harness(run, None).name == mixture["tiers"]["16"]["version"]
    graph = build_graph().compile(checkpointer=InMemorySaver())
    assert "gate" in graph.get_graph().nodes
