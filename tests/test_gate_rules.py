"""The gate's rule is a strategy (``search/rules.py``): each built-in rule decides as its verdict function does, and a
third rule is one class and one registry entry, used by the screening, the gate node, the editor's input and
evolve's first lines without a switch on its name anywhere."""

from __future__ import annotations

import io
from typing import Any, cast, get_args

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from rich.console import Console

from tests.conftest import run_context
from videvolve.editing import HeuristicEditor
from videvolve.editing.base import EditorInput, Proposal, Workspaces
from videvolve.loop.context import Context, GateSettings
from videvolve.loop.services import Run
from videvolve.search.events import GateEvent, KnownEvent
from videvolve.search.gate import Decision, aggregate, gate_rule, paired_rule, rule_text
from videvolve.search.rules import RULES, PairedRule, VideoRsiRule, rule_named
from videvolve.search.screening import screen
from videvolve.search.services import AcceptanceRule, Announcement, GateRules, Look
from videvolve.testing import FakeRun
from videvolve.usage import VISUAL_TOKENS


class CheaperOnly:
    """A rule for tests only: a candidate is kept when it costs less than its parent, whatever it scores."""

    name = "cheaper-only"
    spends_wealth = False
    seed_bound = False

    def __init__(self, sequential: bool = False) -> None:
        self.sequential = sequential
        self.decided: list[int] = []  # the rung sizes it was asked to decide on

    def decide(self, look: Look) -> tuple[Decision, dict[str, float | None]]:
        self.decided.append(len(look.tasks))
        cheaper = look.c2 < look.c
        return Decision(cheaper, f"cheaper-only: cost {look.c2:.1f} {'<' if cheaper else '>='} {look.c:.1f}"), {}

    def accept_early(self, look: Look) -> str | None:
        return "cheaper on a rung is cheaper on the set"

    def stop_early(self, look: Look) -> tuple[str, bool] | None:
        return (f"cheaper-only: dearer ({look.c2:.1f} > {look.c:.1f})", True) if look.c2 > look.c else None

    def tolerance(self, gate: GateRules, n_selection: int) -> float:
        return 1.0

    def text(self, gate: GateRules, n_selection: int) -> str:
        return f"CHEAPER-ONLY: a revision is kept when it costs less ({n_selection} questions)"

    def announce(self, gate: GateRules, n_selection: int, videos: int | None) -> list[Announcement]:
        return [Announcement("cheaper-only, any cheaper revision is kept; ", "it ignores the score")]


def _rule_is_an_acceptance_rule(rule: CheaperOnly) -> AcceptanceRule:  # mypy checks the test rule's protocol
    return rule


def _with_rule(ctx: Context, name: str) -> Context:
    """``ctx`` under the rule ``name`` (a test's rule is no choice of the ``--gate`` flag: set without validation)."""
    return ctx.model_copy(update={"gate": ctx.gate.model_copy(update={"rule": name})})


class EventRun(FakeRun):
    """``FakeRun`` with the run's event log: what the gate node writes."""

    events: list[KnownEvent]

    def event(self, event: KnownEvent) -> None:
        self.events = [*getattr(self, "events", []), event]


SCORES = {"p": [1.0 if i % 2 else 0.0 for i in range(40)], "cheap_worse": [0.0] * 40, "dear_better": [1.0] * 40}
FRAMES: dict[str, int | list[int]] = {"p": 16, "cheap_worse": 8, "dear_better": 32}


def _gate_node(ctx: Context, candidates: list[str]) -> tuple[dict[str, Any], EventRun]:
    from videvolve.nodes.gate import gate

    run = EventRun(ctx, SCORES, dict(FRAMES), videos=10)
    state = {"parent": "p", "candidates": candidates, "iteration": 1, "operators": {}, "history": [], "tree": {}}
    return gate(cast(Any, state), cast("Runtime[Run]", Runtime(context=run))), run


def test_every_choice_of_the_gate_flag_names_a_registered_rule() -> None:
    assert set(get_args(GateSettings.model_fields["rule"].annotation)) == set(RULES)
    assert isinstance(GateSettings().acceptance, PairedRule)
    assert isinstance(GateSettings(rule="video-rsi").acceptance, VideoRsiRule)
    with pytest.raises(ValueError, match="no gate rule is named 'nonsense'"):
        rule_named("nonsense")
    with pytest.raises(ValueError, match="built-in rules"):
        rule_text(0.1, 0.2, 0.02, VISUAL_TOKENS, rule="nonsense")


def test_the_built_in_rules_decide_and_speak_as_their_functions() -> None:
    """Each rule's verdict is its function's on the same results; its words are ``rule_text``'s; its terms as before."""
    ctx = Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=3, gate=GateSettings(cost_ceiling=20.0))
    run = FakeRun(ctx, {"p": SCORES["p"], "c": [1.0 if i % 3 else 0.0 for i in range(40)], "s": [0.0] * 40},
                  {"p": 16, "c": 15, "s": 18}, videos=10)
    tasks = run.selection
    p, c, s = (run.evaluate(v, tasks, "selection") for v in ("p", "c", "s"))
    (a, cost), (a2, cost2), c_seed = aggregate(p), aggregate(c), aggregate(s)[1]
    look = Look(tasks, p, c, tasks, ctx.gate, a, cost, a2, cost2, s, c_seed, 0.025, True, 3)
    paired, extra = PairedRule().decide(look)
    assert paired == paired_rule(tasks, p, c, 0.025, ctx.gate.cost_measure, 0.1, 0.2, 0.02, 3, s, 20.0,
                                 over_videos=True, stated_level=0.05)
    assert extra == {"p_gain": paired.stats.p_gain, "p_videos": paired.stats.over_videos.p_gain,  # type: ignore[union-attr]
                     "bound": paired.stats.lower_gate}  # type: ignore[union-attr]
    rsi, none = VideoRsiRule().decide(look)
    assert (rsi, none) == (gate_rule(a, cost, a2, cost2, 0.1, 0.2, 1 / 40, 20.0), {})
    for gate in (GateSettings(margin=0.03, level=0.01), GateSettings(rule="video-rsi", eps=0.1, cost_ceiling=9.0)):
        eps = gate.eps_for(50)
        assert gate.acceptance.text(gate, 50) == rule_text(gate.alpha, gate.beta, eps, gate.cost_measure, gate.rule,
                                                           gate.level, gate.margin, gate.cost_ceiling)
    assert (GateSettings().terms(40).tolerance, GateSettings(rule="video-rsi").terms(40).tolerance) == (0.02, 1 / 40)
    with pytest.raises(ValueError, match="at a level"):
        PairedRule().decide(Look(tasks, p, c, tasks, ctx.gate, a, cost, a2, cost2))


@pytest.mark.parametrize("name", ["paired", "video-rsi"])
@pytest.mark.parametrize("mode", ["full", "multi-fidelity"])
def test_screening_with_a_rule_given_is_screening_with_the_rule_the_settings_name(name: str, mode: str) -> None:
    ctx = _with_rule(Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=2,
                             gate=GateSettings(validation=mode)), name)
    cands = ["cheap_worse", "dear_better"]
    named, _ = screen(FakeRun(ctx, SCORES, dict(FRAMES), videos=10), "p", cands, {}, 0)
    given, _ = screen(FakeRun(ctx, SCORES, dict(FRAMES), videos=10), "p", cands, {}, 0, rule=rule_named(name))
    assert [e.model_dump() for e in named] == [e.model_dump() for e in given]


@pytest.mark.parametrize("mode", ["full", "multi-fidelity"])
def test_a_third_rule_decides_in_the_gate_node(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Registered, it is the run's rule: the gate node screens by it, at the full rung only when it is not sequential,
    and a candidate it stops on cost spends no level (it spends no alpha-wealth at all)."""
    rule = CheaperOnly()
    monkeypatch.setitem(RULES, rule.name, rule)
    ctx = _with_rule(Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=1,
                             gate=GateSettings(validation=mode)), rule.name)
    out, run = _gate_node(ctx, ["cheap_worse", "dear_better"])
    by = {e["candidate"]: e for e in out["history"]}
    assert by["cheap_worse"]["decision"] == "accepted"
    assert by["cheap_worse"]["reason"] == "cheaper-only: cost 8.0 < 16.0"
    assert by["cheap_worse"]["rung"] == by["cheap_worse"]["rungs"] and rule.decided[-1] == 40
    dear = by["dear_better"]
    assert dear["decision"] == "rejected" and dear["level"] is None and by["cheap_worse"]["level"] is None
    if mode == "full":
        assert dear["reason"] == "cheaper-only: cost 32.0 >= 16.0"
    else:  # screened out on the first rung by the rule's own stop, never decided on a partial rung
        assert dear["reason"].startswith("screened out at rung 1/") and "cheaper-only: dearer" in dear["reason"]
        assert rule.decided == [40] and len(run.evaluated["dear_better"]) < 40
    assert [e.candidate for e in run.events if isinstance(e, GateEvent)] == [e["candidate"] for e in out["history"]]


def test_a_sequential_third_rule_accepts_early(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = CheaperOnly(sequential=True)
    monkeypatch.setitem(RULES, rule.name, rule)
    ctx = _with_rule(Context(run_dir="/tmp/x", run_id="x", tasks="t.jsonl", seed=1,
                             gate=GateSettings(validation="multi-fidelity")), rule.name)
    out, run = _gate_node(ctx, ["cheap_worse"])
    (entry,) = out["history"]
    assert entry["decision"] == "accepted" and entry["rung"] == 1
    assert entry["reason"].startswith("accepted early at rung 1/")
    assert entry["reason"].endswith("cheaper-only: cost 8.0 < 16.0; cheaper on a rung is cheaper on the set")
    assert len(run.evaluated["cheap_worse"]) < 40


def test_a_third_rule_runs_the_whole_loop(monkeypatch: pytest.MonkeyPatch, small_world: Any, tmp_path: Any,
                                          seed: Any) -> None:
    """The editor is told the rule's words and terms, the gate decides by it, evolve's first line is its own."""
    from videvolve.cli.evolve_cmd import gate_power
    from videvolve.graph import build_graph
    from videvolve.loop.services import open_run

    rule = CheaperOnly()
    monkeypatch.setitem(RULES, rule.name, rule)
    ctx = _with_rule(run_context(small_world, tmp_path, seed, iterations=1, no_trials=True), rule.name)
    seen: list[EditorInput] = []

    class Recording(HeuristicEditor):
        def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
            seen.append(inp)
            return super().propose(inp, workspaces)

    graph = build_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": ctx.run_id}, "recursion_limit": 500}
    with open_run(ctx, editor=Recording(trials=False)) as run:
        graph.invoke({}, config, context=run)
        state = graph.get_state(config).values
        n = len(run.selection)
    assert seen and seen[0].gate_rule == f"CHEAPER-ONLY: a revision is kept when it costs less ({n} questions)"
    assert seen[0].gate is not None and (seen[0].gate.tolerance, seen[0].gate.spends_wealth) == (1.0, False)
    (entry,) = state["history"]
    assert "cheaper-only: " in entry["reason"] and entry["level"] is None  # its words: the rule decided
    out = io.StringIO()
    gate_power(ctx, n, 4, Console(file=out, width=200))
    assert out.getvalue() == "gate: cheaper-only, any cheaper revision is kept; warning: it ignores the score\n"
