"""The offline demo: a SynthWorld, an overnight run in minutes (SimVLM, heuristic editor), and the held-out test.

Everything runs on the CPU with no network: SynthWorld videos, SimVLM as the frozen model, harnesses in the
sandbox, the LangGraph loop with its SQLite checkpointer, the Chroma memory of diagnoses.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console

from videvolve.cli.compare_cmd import comparison_table, paired_line, visual_tokens
from videvolve.cli.data_cmds import stats_table
from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world, world_stats
from videvolve.evaluation.experiment import compare_on_test
from videvolve.folderlock import remove_tree
from videvolve.graph.builder import GOES_ON
from videvolve.graph.driver import evolve
from videvolve.loop.context import Context, GateSettings, StopSettings
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.report import build_report
from videvolve.rundir import RunDir
from videvolve.search.history import GateEntry, entries
from videvolve.tasks import selection_size

console = Console()


def _line(node: str, values: dict[str, Any], state: dict[str, Any], started: float) -> None:
    if node == "prepare":
        n = state["tree"][state["incumbent"]].get("n")
        console.print(f"seed {state['incumbent']}: selection score {state['incumbent_score']:.3f} on {n} questions, "
                      f"{state['incumbent_cost']:,.0f} visual tokens/question")
    if node != GOES_ON:  # an iteration ends where the run decides whether to go on
        return
    it = int(state.get("iteration", 1)) - 1
    for e in entries(h for h in state.get("history") or [] if h.get("iteration") == it):
        console.print(f"{e.line()} [{time.time() - started:.0f} s]", highlight=False)


DEMO_QUESTIONS = 100
"""Questions asked per video, as many as its events allow (about 39 in a 6-minute video): the demo's world is the
efficacy protocol's (``bench/protocol.py: SIZE``), whose 335 selection questions detect about +0.054."""


def run_demo(out: Path, videos: int = 32, minutes: float = 6.0, seed: int = 0, iterations: int = 6,
             children: int = 3) -> int:
    """Run the demo into ``out``; returns an exit code."""
    started = time.time()
    console.rule("1. SynthWorld: long videos of short events, questions of both kinds")
    world = generate_world(out / "world", videos=videos, minutes=minutes, seed=seed, questions=DEMO_QUESTIONS)
    console.print(stats_table(world_stats(world.tasks)))
    gate = GateSettings(validation="multi-fidelity")
    n_selection, selection_videos = selection_size(world.tasks)
    text, warn = gate.power(n_selection, selection_videos)
    console.print(("warning: " if warn else "") + text, highlight=False)

    console.rule(f"2. evolve: {iterations} iterations from the uniform seed (SimVLM, heuristic editor)")
    run = out / "run"
    remove_tree(run)
    remove_tree(out / "memory")
    ctx = Context(run_dir=str(run.resolve()), run_id="demo", tasks=str(world.tasks_path.resolve()),
                  seed_harness="uniform", memory=str((out / "memory").resolve()), seed=seed,
                  runtime=RuntimeSettings(concurrency=2), stop=StopSettings(iterations=iterations),
                  gate=gate, cache=str((out / "cache.sqlite").resolve()), children=children)
    final = evolve(ctx, lambda node, values, state: _line(node, values, state, started))
    console.print(f"stopped: {final.get('stop_reason')}; best harness {final['incumbent']} -> {RunDir(run).best}")

    console.rule("3. the held-out test split, which neither the editor nor the gate ever saw")
    cmp = compare_on_test(run, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2))
    console.print(comparison_table(cmp.to_dict(), "seed (uniform)"))
    console.print(paired_line(cmp.to_dict()), highlight=False)
    report = build_report(run)
    console.print(f"report, with this comparison: {report} (plots: {RunDir(run).report / 'progress.png'})")
    console.rule("what this showed")
    history = entries(final.get("history") or [])
    for sentence in summary_sentences(cmp.to_dict(), history, gate.detectable_gain(n_selection, selection_videos)):
        console.print(sentence, highlight=False)
    console.print(f"done in {time.time() - started:.0f} s; inspect diagnoses with `videvolve diagnoses list "
                  f"--run {run}`")
    return 0


def summary_sentences(cmp: dict[str, Any], history: list[GateEntry], detectable: float | None = None) -> list[str]:
    """Plain sentences: what changed, what it cost, how sure we are, the target, and why when it is not reached.

    ``detectable``: the gain the selection set detects with 80 % power (said when nothing was kept).
    """
    seed, best = cmp["seed"], cmp["best"]
    accepted = [e for e in history if e.decision == "accepted"]
    kept = [e.operator or "?" for e in lineage(accepted, best.get("version"))]
    tried = [e for e in history if e.candidate]
    if kept:
        changed = (f"The loop tried {len(tried)} revision(s) of the uniform seed and kept {len(kept)} "
                   f"({', '.join(kept)})")
        if len(accepted) > len(kept):  # several passed one decision: the best of them on the selection set went on
            changed += (f"; the gate accepted {len(accepted)}, and where several passed one decision the best of "
                        "them went on")
        changed += "."
    else:
        changed = f"The loop tried {len(tried)} revision(s) of the uniform seed and kept none: the seed stayed best."
    v0, v1 = visual_tokens(seed), visual_tokens(best)
    ratio = v1 / v0 if v0 else float("nan")
    cost = (f"On the held-out test split the evolved harness shows the model {best['frames_per_question']:.0f} "
            f"frames and {v1:,.0f} visual tokens per question, against the seed's "
            f"{seed['frames_per_question']:.0f} frames and {v0:,.0f} visual tokens ({ratio:.2f}x the visual tokens).")
    diff, p = cmp["score_diff"], cmp["score_p"]
    verdict = "a gain we can trust at p < 0.05" if diff > 0 and p < 0.05 else \
        "not a difference this test split can establish" if p >= 0.05 else "a loss"
    sure = (f"Its mean per-question score changed by {diff:+.3f} (paired bootstrap p = {p:.4f}"
            + (f", mcq McNemar p = {cmp['mcq_p']:.4f}" if cmp.get("mcq_p") is not None else "")
            + f"): {verdict}")
    g = cmp.get("grounding_p")
    if g is not None and g < 0.05 and "grounding" in seed and "grounding" in best:
        a, b = seed["grounding"]["miou"], best["grounding"]["miou"]
        sure += f"; grounding alone {'rose' if b > a else 'fell'}, mIoU {a:.3f} -> {b:.3f} (p = {g:.4f})"
    if cmp.get("videos"):
        sure += (f"; with videos as the units (questions about one video are not independent), "
                 f"{cmp['videos_gaining']} of {cmp['videos']} test video(s) gain, sign-flip p = {cmp['video_p']:.4f}")
    sure += "."
    reached = diff > 0 and p < 0.05 and ratio <= 1.1
    target = ("The target -- a significant test-split gain at no more than 1.1x the seed's visual tokens -- is "
              + ("reached." if reached else f"not reached: {diff:+.3f} (p = {p:.4f}) at {ratio:.2f}x the tokens."))
    if reached:
        return [changed, cost, sure, target]
    return [changed, cost, sure, target, why_not(kept, history, diff, p, ratio, detectable)]


def lineage(accepted: list[GateEntry], best: str | None) -> list[GateEntry]:
    """The accepted revisions the evolved harness descends from, oldest first (all of them when ``best`` is unknown)."""
    if best is None:
        return accepted
    by_candidate = {e.candidate: e for e in accepted}
    line: list[GateEntry] = []
    while (e := by_candidate.get(best)) is not None and e not in line:
        line.append(e)
        best = e.parent
    return line[::-1]


def why_not(kept: list[str], history: list[GateEntry], diff: float, p: float, ratio: float,
            detectable: float | None) -> str:
    """Why the demo's target was not reached, in the run's own numbers."""
    if kept and ratio > 1.1:
        return (f"Why: the kept revisions cost {ratio:.2f}x the seed's visual tokens together (each decision allows "
                "at most 1.1x its parent's).")
    if kept:
        return (f"Why: what the selection set showed did not hold on the test split ({diff:+.3f}, p = {p:.4f}): "
                "the gate's test over the selection videos bounds, at its level, how often a gain they all show fails "
                "on other videos, not never (see the note at the start).")
    gated = [e for e in history if e.gated and e.score is not None]
    if not gated:
        return "Why: no revision reached the selection set (see the iteration lines above)."
    most = max(e.n or 0 for e in gated)  # judged on the whole selection set, not stopped on a first rung's few
    best = max((e for e in gated if (e.n or 0) == most), key=lambda e: (e.cand_score or 0.0) - (e.score or 0.0))
    gain = (best.cand_score or 0.0) - (best.score or 0.0)
    text = f"Why: the closest revision, {best.operator or '?'} (iteration {best.number}), scored {gain:+.3f} on "
    text += f"{best.n} selection questions" if best.n else "the selection set"
    if best.p_gain is not None and best.level is not None:
        over = f", over its videos {best.p_videos:.4f}" if best.p_videos is not None else ""
        text += f" (one-sided p = {best.p_gain:.4f}{over} against the gate's level {best.level:.4g} there)"
    text += ", and the gate kept nothing it could not tell from noise"
    if detectable is not None:
        text += (f"; this selection set detects gains of about {detectable:+.3f} with 80 % power, so smaller ones "
                 "are rejected: more selection questions or videos (see the warning at the start) let them through")
    return text + "."
