"""The loop's parts without the graph: routing, the gate rule, the investigator, the editors' choices and inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.steps_support import model_call
from videvolve.editing import EditorInput, HeuristicEditor, PastDiagnosis, read_files, write_candidate
from videvolve.editing.base import Proposal, check_edit
from videvolve.editing.file_edits import set_key
from videvolve.editing.heuristic import score_operators
from videvolve.errors import HarnessError
from videvolve.evaluation.results import TaskResult
from videvolve.graph.routing import route_after_edit, route_after_record, route_after_validate
from videvolve.investigator.procedure import Investigator
from videvolve.memory.records import Diagnosis, RevisionOutcome
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.search.gate import gate_rule
from videvolve.search.tree import Tree
from videvolve.skill_library.harness import content_hash, copy_harness, seed_path
from videvolve.tasks import Interval, Prediction, Task


def test_routing_is_pure():
    assert route_after_edit({"candidates": ["abc"]}) == "validate"
    assert route_after_edit({"candidates": []}) == "record"
    assert route_after_validate({"candidates": ["abc"], "feedback": None}) == "gate"
    assert route_after_validate({"candidates": ["abc"], "feedback": "syntax error"}) == "edit"
    assert route_after_validate({"candidates": [], "dropped": [{"candidate": "abc"}], "feedback": None}) == "record"
    tree: Tree = {"p": {"parent": None}, "c": {"parent": "p", "pending": True}, "d": {"parent": "x", "pending": True}}
    assert route_after_edit({"candidates": [], "parent": "p", "tree": tree}) == "gate"  # a pending child competes
    assert route_after_edit({"candidates": [], "parent": "x2", "tree": tree}) == "record"
    assert route_after_validate({"candidates": [], "parent": "p", "tree": tree, "feedback": None}) == "gate"
    assert route_after_record({"stop_reason": None}) == "solve"
    assert route_after_record({"stop_reason": "6 iterations"}) == "__end__"


def test_every_node_of_the_graph_has_its_status_line():
    """The CLI's status line names what follows each node: a node added to the graph needs its words there."""
    from videvolve.cli.evolve_cmd import NEXT
    from videvolve.graph.builder import GOES_ON, NODES, build_graph

    assert set(NEXT) == set(build_graph().nodes) == {n.__name__ for n in NODES} and GOES_ON in NEXT


@pytest.mark.parametrize(("a", "c", "a2", "c2", "accept"), [
    (0.5, 100, 0.6, 110, True),          # better, cost exactly (1 + alpha) C
    (0.5, 100, 0.6, 110.01, False),      # better, just over
    (0.5, 100, 0.5, 80, True),           # equal score, cost exactly (1 - beta) C
    (0.5, 100, 0.5, 80.01, False),       # equal score, cut just short of beta
    (0.5, 100, 0.5, 100, False),         # nothing gained, nothing saved
    (0.5, 100, 0.45, 80, True),          # a loss of exactly eps with the cost cut
    (0.5, 100, 0.449, 50, False),        # a loss beyond eps, whatever the saving
    (0.5, 0, 0.5, 0, False),             # C = 0: nothing to cut
    (0.5, 0, 0.6, 0, True),              # C = 0 and better at no cost
])
def test_gate_rule_boundaries(a, c, a2, c2, accept):
    d = gate_rule(a, c, a2, c2, alpha=0.1, beta=0.2, eps=0.05)
    assert d.accept is accept, d.reason
    assert d.reason


# ---- the investigator on crafted traces ----

@pytest.fixture(scope="module")
def crafted(small_world):
    """A grounding task whose target is a glyph of at least 24 px, and the script event behind it."""
    by_video = {s.video_id: s for s in small_world.scripts}
    for t in small_world.tasks:
        if t.kind == "grounding" and t.intervals:
            script = by_video[t.video_id]
            colour, shape = t.meta["target"].split()
            events = script.occurrences(colour, shape)
            if events[0].size >= 24 and events[0].end - events[0].start >= 2:
                return t, events[0]
    pytest.fail("the small world (tests/conftest.py: 4 videos, 3 min, seed 5) no longer has a grounding target of "
                "at least 24 px lasting 2 s or more: SynthWorld's generator changed; pick another world seed there "
                "so the investigator tests keep their case")


def result(task: Task, outcome="ok", answer=None, score=0.0, kind=None, error=None) -> TaskResult:
    pred = None if outcome == "error" else Prediction(task_id=task.id, kind=task.kind, answer=answer)
    return TaskResult(task_id=task.id, harness_id="h", kind=task.kind, outcome=outcome, error_kind=kind, error=error,
                      prediction=pred, score=score, usage={"frames": 8})


def trace_at(times, max_side=None):
    return [model_call(list(times), max_side=max_side)]


def diagnose(task, res, trace):
    inv = Investigator(SimVLM(), cost_model("qwen2.5-vl"), probe_frames=16)
    d = inv.diagnose(task, res, trace, "run", 0)
    return d, inv.ledger


def test_missed_event_only_when_unobserved_and_probe_finds_it(crafted):
    task, e = crafted
    far = [t for t in (e.start - 40, e.end + 40) if 0 < t < task.duration]
    d, ledger = diagnose(task, result(task, answer=[]), trace_at(far))
    assert d.category == "missed_event" and "never observed" in d.hypothesis
    assert ledger["frames"] > 0 and d.probe_cost["frames"] == ledger["frames"]  # its own ledger
    # observed inside the event at full resolution: not missed, the evidence was there and unused
    mid = (e.start + e.end) / 2 - ((e.start + e.end) / 2) % 0.25
    d2, _ = diagnose(task, result(task, answer=[]), trace_at([mid]))
    assert d2.category == "evidence_unused"


def test_misperception_only_when_full_resolution_reads_what_the_trace_could_not(crafted):
    task, e = crafted
    mid = (e.start + e.end) / 2 - ((e.start + e.end) / 2) % 0.25
    d, _ = diagnose(task, result(task, answer=[]), trace_at([mid], max_side=48))
    assert d.category == "misperception" and "48 px" in d.hypothesis
    d2, _ = diagnose(task, result(task, answer=[]), trace_at([mid], max_side=320))
    assert d2.category == "evidence_unused"


def test_boundary_error_only_when_found_with_coarse_edges(crafted):
    task, e = crafted
    coarse = [Interval(start=max(0.0, e.start - 30), end=e.end + 30)]
    d, ledger = diagnose(task, result(task, answer=coarse, score=0.1), trace_at([e.start]))
    assert d.category == "boundary_error" and ledger["frames"] == 0
    far = [Interval(start=max(0.0, e.end + 50), end=e.end + 60)]
    d2, _ = diagnose(task, result(task, answer=far, score=0.0), trace_at([e.end + 55]))
    assert d2.category != "boundary_error"


def test_error_outcomes_map_to_their_categories(crafted):
    task, _ = crafted
    for kind, category in (("parse", "format_error"), ("budget", "budget_exhausted"),
                           ("bad_request", "infra_error"), ("crash", "crash"), ("timeout", "crash")):
        d, ledger = diagnose(task, result(task, outcome="error", kind=kind, error=f"{kind}!"), [])
        assert d.category == category and ledger["frames"] == 0


def test_unresolved_when_the_probe_sees_nothing_either(small_world):
    script = small_world.scripts[0]
    quiet = next(t for t in range(10, int(script.duration) - 10) if all(script.event_at(t + k / 4) is None
                                                                        for k in range(12)))
    task = Task(id="q", video_id=script.video_id, video=str(small_world.root / "videos" / f"{script.video_id}.mp4"),
                kind="grounding", question="When does the red star appear?", answer=[[quiet, quiet + 2.5]],
                duration=script.duration)
    d, _ = diagnose(task, result(task, answer=[]), trace_at([quiet + 30]))
    assert d.category == "unresolved"


def test_absent_target_reported_is_a_misperception(small_world, crafted):
    task, e = crafted
    absent = task.model_copy(update={"answer": [], "question": "When does the red cross appear?"})
    quiet_mid = (e.start + e.end) / 2
    d, _ = diagnose(absent, result(absent, answer=[Interval(start=quiet_mid - 1, end=quiet_mid + 1)]), [])
    assert d.category in ("misperception", "unresolved")


# ---- the heuristic editor ----

def diag(category: str, i: int = 0, video: str = "v") -> Diagnosis:
    return Diagnosis(id=f"{category}{i}", run_id="r", iteration=0, harness_id="h", task_id=f"t{i}", video_id=video,
                     kind="grounding", category=category, hypothesis=f"{category} happened", applies_when="w",
                     preserve="p")


def inp(categories: list[str], files=None, similar=(), tried=()) -> EditorInput:
    files = files or read_files(seed_path("uniform"))
    return EditorInput(incumbent="h", files=files, diagnoses=[diag(c, i) for i, c in enumerate(categories)],
                       similar=list(similar), tried=list(tried))


def proposed(editor: HeuristicEditor, given: EditorInput) -> Proposal:
    """``editor``'s proposal for ``given`` (the heuristic editor always has one for these inputs)."""
    proposal = editor.propose(given)
    assert proposal is not None
    return proposal


def test_different_mixes_choose_different_operators():
    editor = HeuristicEditor()
    files = read_files(seed_path("uniform"))
    files["config.toml"] = set_key(files["config.toml"], "n_frames", 128)  # room for more frames in one request
    chosen = {mix: proposed(editor, inp(list(mix), files=files)).operator for mix in [
        ("misperception", "misperception", "missed_event"),
        ("boundary_error", "boundary_error"),
        ("missed_event", "missed_event", "unresolved"),
        ("format_error",),
    ]}
    assert chosen == {("misperception", "misperception", "missed_event"): "identify_flagged",  # detail where it is
                      ("boundary_error", "boundary_error"): "add_refinement",
                      ("missed_event", "missed_event", "unresolved"): "denser_sampling",
                      ("format_error",): "stricter_format"}
    assert proposed(editor, inp([])).operator == "sparser_sampling"  # no failures: try a cost cut


def test_memory_outcomes_steer_the_choice():
    base = [s for s, op in score_operators(inp(["missed_event", "boundary_error"]))]
    assert base  # denser_sampling and add_refinement compete
    bad = diag("missed_event", 9).model_copy(update={"outcome": RevisionOutcome(decision="rejected",
                                                                                operator="add_refinement")})
    good = diag("missed_event", 8).model_copy(update={"outcome": RevisionOutcome(decision="accepted",
                                                                                 operator="denser_sampling")})
    routes = ["grounding_lowres_denser", "mcq_lowres_denser", "refine_mcq_only"]  # set aside: these two compete
    files = read_files(seed_path("uniform"))
    files["config.toml"] = set_key(files["config.toml"], "n_frames", 128)  # room for more frames in one request
    steered = proposed(HeuristicEditor(), inp(["boundary_error", "missed_event"], files=files, tried=routes,
                                              similar=[PastDiagnosis(diagnosis=bad, similarity=1.0),
                                                       PastDiagnosis(diagnosis=good, similarity=1.0)]))
    plain = proposed(HeuristicEditor(), inp(["boundary_error", "missed_event"], files=files, tried=routes))
    assert plain.operator == "add_refinement" and steered.operator == "denser_sampling"
    assert proposed(HeuristicEditor(), inp(["boundary_error"], tried=["add_refinement"])).operator != "add_refinement"


def test_operators_make_bounded_diffs_and_never_touch_the_incumbent(tmp_path: Path):
    inc = copy_harness(seed_path("uniform"), tmp_path)
    before = {p: (inc / p).read_text() for p in ("solver.py", "config.toml")}
    for categories in (["misperception"], ["boundary_error"], ["missed_event"]):
        proposal = proposed(HeuristicEditor(), inp(categories, files=read_files(inc)))
        version = write_candidate(inc, tmp_path, proposal)
        manifest = json.loads((tmp_path / version / "manifest.json").read_text())
        assert manifest["parent_id"] == inc.name and manifest["revision"]["operator"] == proposal.operator
        diff = manifest["revision"]["diff"]
        assert diff and sum(1 for line in diff.splitlines() if line.startswith(("+", "-"))) < 60
        assert content_hash(tmp_path / version) == version
    assert {p: (inc / p).read_text() for p in before} == before
    assert content_hash(inc) == inc.name


def test_edit_paths_are_checked(tmp_path: Path):
    for bad in ("../x.py", "/etc/passwd", "tools/../../x.py", "notes.txt", "sub/solver.py"):
        assert check_edit(bad, "x") is not None
    assert check_edit("tools/my_tool/tool.py", "x") is None
    inc = copy_harness(seed_path("uniform"), tmp_path)
    with pytest.raises(HarnessError, match="leaves the harness"):
        write_candidate(inc, tmp_path, Proposal(operator="x", rationale="r", edits={"../evil.py": "x"}))


def test_a_balanced_operator_keeps_the_change_and_cuts_the_frames():
    """add_refinement at 2.35x the cost, balanced to fit: the refinement stays, the frame count falls by the factor."""
    import tomllib

    from videvolve.editing.heuristic import balanced
    from videvolve.editing.operators import CATALOGUE, config_of

    files = read_files(seed_path("uniform"))
    refine = next(op for op in CATALOGUE if op.name == "add_refinement")
    plain = refine.apply(files, config_of(files))
    both = balanced(refine, 0.45).apply(files, config_of(files))
    assert plain and both and both["solver.py"] == plain["solver.py"]  # the same change of how it looks
    before, after = tomllib.loads(files["config.toml"]), tomllib.loads(both["config.toml"])
    assert after["n_frames"] == int(before["n_frames"] * 0.45) and after["refine_share"] > 0
    assert balanced(refine, 1.0).apply(files, config_of(files)) is None  # no cut: not a variant worth a trial


def test_a_move_for_one_kind_is_balanced_with_that_kinds_frames_alone():
    """refine_mcq_only over its bound was balanced with fewer frames for every kind: an mcq gain paid for with
    grounding's frames (world 49464: grounding 256 -> 220 frames, -0.010 IoU on the test split, p 0.018)."""
    import tomllib

    from videvolve.editing.base import GateTerms
    from videvolve.editing.heuristic import balance_factor, balanced
    from videvolve.editing.operators import CATALOGUE, config_of

    files = read_files(seed_path("uniform"))
    refine = next(op for op in CATALOGUE if op.name == "refine_mcq_only")
    both = balanced(refine, 0.8).apply(files, config_of(files))
    plain = refine.apply(files, config_of(files))
    assert both and plain
    before, mid, after = (tomllib.loads(f["config.toml"]) for f in (files, plain, both))
    assert after["n_frames"] == before["n_frames"]  # grounding's (and the shared) count untouched
    assert after["mcq"]["n_frames"] == int(mid["mcq"]["n_frames"] * 0.8)
    gate = GateTerms(alpha=0.1, beta=0.2, tolerance=0.02)
    rows = [{"kind": "mcq", "cost": 6000.0}, {"kind": "grounding", "cost": 5120.0}]
    report = {"parent_mean_cost": 5120.0, "mean_cost": 5560.0, "mean_difference_vs_parent": 0.1, "per_task": rows}
    factor = balance_factor(report, refine, gate)  # mcq's 3000 of the 5560 a question shrinks to fit 0.95 x 5632
    assert factor == pytest.approx((0.95 * 1.1 * 5120 - 2560) / 3000)
    rows[0]["cost"] = 600.0  # mcq's share too small to bring the cost within the bound
    assert balance_factor({**report, "mean_cost": 5860.0}, refine, gate) is None


def test_editor_calls_go_through_the_cache_and_are_counted(tmp_path: Path):
    """A resumed run pays for no editor reply twice: the second identical request is served by the cache."""
    from videvolve.models.cache import MeteredVLM, ResponseCache
    from videvolve.testing import ScriptedReplies

    model = ScriptedReplies(["first", "second"])
    metered = MeteredVLM(model, ResponseCache(tmp_path / "c.sqlite"))
    msgs = [{"role": "user", "content": "propose a revision"}]
    assert metered.complete(msgs).text == "first" and metered.complete(msgs).text == "first"
    assert len(model.requests) == 1 and metered.ledger["calls"] == 2 and metered.ledger["cache_hits"] == 1


def test_an_editor_reply_of_5000_tokens_parses():
    """Whole files come back: a long reply (about 20,000 characters) is read as one revision."""
    from videvolve.editing import LLMEditor
    from videvolve.models.cost import text_tokens
    from videvolve.testing import ScriptedReplies

    body = "\n".join(f"    x{i} = {i}  # a long solver line that keeps going, word after word" for i in range(330))
    solver = f"def solve(task, ctx):\n{body}\n    return 'A'\n"
    reply = json.dumps({"rationale": "r", "applies_when": "a", "preserve": "p",
                        "edits": [{"path": "solver.py", "content": solver}]})
    assert text_tokens(reply) >= 5000
    proposal = LLMEditor(ScriptedReplies([reply])).propose(inp(["misperception"]))
    assert proposal is not None and proposal.edits["solver.py"] == solver


def test_a_balanced_variant_that_is_its_parent_again_is_not_tried():
    """Under a budget, 10 % more frames balanced back to the ceiling can land on the parent's own frame count: such a
    "variant" is the parent, and a trial of it (seen as "+0.000 at the parent's cost" in a teacher run) is wasted."""
    from typing import Any

    from videvolve.editing.base import EditorInput, GateTerms
    from videvolve.editing.heuristic import HeuristicEditor
    from videvolve.editing.operators import CATALOGUE, config_of, set_key

    files = read_files(seed_path("uniform"))
    files["config.toml"] = set_key(set_key(files["config.toml"], "n_frames", 169), "max_side", 320)
    denser = next(op for op in CATALOGUE if op.name == "denser_sampling")
    assert denser.apply(files, config_of(files))  # 169 -> 185 frames

    class Tools:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def call(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
            self.calls.append(name)
            return json.dumps({"mean_difference_vs_parent": 0.0, "mean_cost": 11492.0,
                               "parent_mean_cost": 11492.0}), True

    gate = GateTerms(alpha=0.1, beta=0.2, tolerance=0.02)
    report = {"parent_mean_cost": 11492.0, "mean_cost": 12580.0, "mean_difference_vs_parent": 0.06}
    tried: list[Any] = [(False, 0.06, -12580.0, 0, 1.0, denser, report)]
    for ceiling, trials in ((12109.4, 0), (13000.0, 1)):  # back to 169 frames; 0.95 x 13000 / 12580 -> 177
        tools = Tools()
        inp = EditorInput(incumbent="p", files=files, diagnoses=[], gate=gate.model_copy(update={"ceiling": ceiling}))
        out = HeuristicEditor(trials=True)._balanced(inp, tools, ["t"], files, tried)  # type: ignore[arg-type]
        assert tools.calls.count("trial") == trials and len(out) == trials, (ceiling, tools.calls)


def test_a_cut_that_stops_just_short_of_the_cuts_bound_is_tried_deeper():
    """scan_refine's 20 % frame cut lands at 0.81x its parent's tokens (the final look does not shrink with the
    frames): seen four iterations running on world 20113, each turned down on cost alone. Balanced, it goes to 0.76x
    and its trial decides; a cut that lost score, or a prototype that cut nothing, is left alone."""
    import tomllib
    from typing import Any

    from videvolve.editing.base import EditorInput, GateTerms
    from videvolve.editing.heuristic import HeuristicEditor, balance_factor, passes_on_trial
    from videvolve.editing.operators import CATALOGUE, config_of

    files = read_files(seed_path("scan_refine"))
    sparser = next(op for op in CATALOGUE if op.name == "sparser_sampling")
    gate = GateTerms(alpha=0.1, beta=0.2, tolerance=0.02)
    short = {"parent_mean_cost": 19484.0, "mean_cost": 15752.0, "mean_difference_vs_parent": -0.003}
    assert not passes_on_trial(short, gate)
    factor = balance_factor(short, sparser, gate)
    assert factor == pytest.approx(0.95 * 0.8 * 19484 / 15752)
    assert balance_factor({**short, "mean_difference_vs_parent": -0.05}, sparser, gate) is None  # lost score
    assert balance_factor({**short, "mean_cost": 19500.0}, sparser, gate) is None  # cut nothing
    refine = next(op for op in CATALOGUE if op.name == "add_refinement")
    assert balance_factor(short, refine, gate) is None  # not a cut: a gain's balance only

    class Tools:
        def __init__(self) -> None:
            self.calls: list[str] = []
            self.written: dict[str, str] = {}

        def call(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
            self.calls.append(name)
            if name == "write_file" and "n_frames" not in args["content"]:
                self.written.setdefault(args["path"], args["content"])
            return json.dumps({"mean_difference_vs_parent": 0.0, "mean_cost": 14900.0,
                               "parent_mean_cost": 19484.0}), True

    tools = Tools()
    inp = EditorInput(incumbent="p", files=files, diagnoses=[], gate=gate)
    tried: list[Any] = [(False, -0.003, -15752.0, 0, 1.0, sparser, short)]
    out = HeuristicEditor(trials=True)._balanced(inp, tools, ["t"], files, tried)  # type: ignore[arg-type]
    assert tools.calls.count("trial") == 1 and len(out) == 1
    passes, _, _, _, _, variant, _ = out[0]
    assert passes and variant.name == "sparser_sampling+fewer_frames"
    frames = tomllib.loads(variant.apply(files, config_of(files))["config.toml"])["frames"]
    plain = tomllib.loads(sparser.apply(files, config_of(files))["config.toml"])["frames"]  # type: ignore[index]
    assert frames < plain < tomllib.loads(files["config.toml"])["frames"]


def test_a_balanced_gain_still_over_its_bound_is_tried_once_more_along_its_two_trials_line():
    """Cost is not proportional to frames: a look whose identification frames do not shrink with its scan, balanced
    to 0.95 x the bound by its frame share, still cost 1.16x (seen: ``identify_flagged+fewer_frames`` over 1.1x).
    The line through the two trials' costs gives a deeper share, tried once; a balanced trial within the bound, or
    one that lost its gain, is left as it is."""
    from typing import Any

    from videvolve.editing.base import EditorInput, GateTerms
    from videvolve.editing.heuristic import HeuristicEditor, balance_factor, secant_factor
    from videvolve.editing.operators import CATALOGUE

    files = read_files(seed_path("uniform"))
    raise_res = next(op for op in CATALOGUE if op.name == "raise_resolution")
    gate = GateTerms(alpha=0.1, beta=0.2, tolerance=0.02)
    full = {"parent_mean_cost": 5000.0, "mean_cost": 8000.0, "mean_difference_vs_parent": 0.2}
    factor = balance_factor(full, raise_res, gate)
    assert factor is not None and factor == pytest.approx(0.95 * 5500 / 8000)
    # cost = 3000 + 5000 x share (3000 does not shrink): the balanced trial lands at 6266, over 5500
    costs = {1.0: 8000.0, factor: 3000.0 + 5000.0 * factor}
    short = {"parent_mean_cost": 5000.0, "mean_cost": costs[factor], "mean_difference_vs_parent": 0.15}
    deeper = secant_factor(factor, full, short, raise_res, gate)
    assert deeper is not None and 3000.0 + 5000.0 * deeper == pytest.approx(0.95 * 5500)
    assert secant_factor(factor, full, {**short, "mean_cost": 5400.0}, raise_res, gate) is None  # within the bound:
    assert secant_factor(factor, full, {**short, "mean_difference_vs_parent": -0.01}, raise_res, gate) is None

    class Tools:
        def __init__(self) -> None:
            self.trials = 0

        def call(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
            if name != "trial":
                return "", True
            self.trials += 1
            cost = short["mean_cost"] if self.trials == 1 else 0.95 * 5500
            return json.dumps({"mean_difference_vs_parent": 0.12, "mean_cost": cost, "parent_mean_cost": 5000.0}), True

    tools = Tools()
    inp = EditorInput(incumbent="p", files=files, diagnoses=[], gate=gate)
    tried: list[Any] = [(False, 0.2, -8000.0, 0, 1.0, raise_res, full)]
    out = HeuristicEditor(trials=True)._balanced(inp, tools, ["t"], files, tried)  # type: ignore[arg-type]
    assert tools.trials == 2 and len(out) == 1
    passes, _, _, _, _, variant, report = out[0]
    assert passes and report["mean_cost"] == pytest.approx(0.95 * 5500) and f"{deeper:.0%}" in variant.summary
