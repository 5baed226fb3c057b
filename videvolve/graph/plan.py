"""What ``evolve --dry-run`` prints: the worst case of a run's plan, computed from its settings and seed harness.

Every count is an upper bound of what the loop can do (tests measure real runs of each seed and editor against it):
question runs are counted for every evaluation a node asks for, reused or not, since the run's ledger counts them
so. Per question, model calls are the seed's ``ctx.ask`` call sites (times a loop's ``max_rounds``), plus one for the
refinement pass a heuristic edit may add; an llm, agent or command editor writes code of its own, so for those the
bound holds only for harnesses that ask no more often than that (``--max-calls`` caps the run whatever they do).
Frames: a harness run in iteration i is at most i edits from the seed, each growing its frames by at most
:data:`FRAME_GROWTH`, and never past the frames its video holds (the longest video's, when the dry run knows it),
every frame priced at the largest size an edit may show.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

from pydantic import BaseModel

from videvolve.loop.context import Context
from videvolve.models.cost import cost_model
from videvolve.skill_library.harness import Harness
from videvolve.skill_library.static_check import parse
from videvolve.tasks import Task

PROBES_PER_FAILURE = 2
"""The procedure investigator probes a failure at most twice (``investigator.procedure``)."""
EDIT_EXTRA_CALLS = 1
"""A heuristic edit adds at most one model call per question (``add_refinement``'s match pass)."""
FRAME_GROWTH = 1.7
"""The largest frame-count growth of one heuristic edit (``grounding_lowres_denser``, ``mcq_lowres_denser``)."""
SHOWN_SIDE = 448
"""The largest side a heuristic edit shows a frame at (``add_refinement``'s refined frames; ``raise_resolution``
stops at 320)."""
SECONDS = {"sim": (2.0, 0.3), "openai": (1.0, 4.0)}
"""Rough seconds per question run (sandbox start, decoding) and per model call, by backend."""


class Plan(BaseModel):
    """The worst case of a run: counts, and the rows the dry run prints."""

    rows: list[tuple[str, str]]
    questions: int
    model_calls: int
    frames: int
    visual_tokens: int
    seconds: float
    calls_per_question: int
    notes: list[str]


def ask_sites(source: str, max_rounds: int) -> int:
    """``ctx.ask`` calls a solver makes at most: each call site once, times ``max_rounds`` inside a loop.

    Walked with a stack, not recursion: a deeply nested file (an editor's, say) is counted, not a RecursionError. A
    file Python cannot parse counts as one call site in a loop (the harness's own load says what is wrong with it).
    """
    try:
        tree = parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return max_rounds
    total = 0
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_loop = stack.pop()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "ask":
            total += max_rounds if in_loop else 1
        loop = in_loop or isinstance(node, (ast.For, ast.While, ast.AsyncFor, ast.comprehension))
        stack.extend((child, loop) for child in ast.iter_child_nodes(node))
    return total


def calls_per_question(harness: Harness) -> int:
    """Model calls one question may cost with this harness or a heuristic edit of it."""
    rounds = int(harness.config.get("max_rounds") or 24)
    sites = sum(ask_sites(p.read_text(encoding="utf-8"), rounds) for p in Path(harness.path).glob("*.py"))
    return max(1, sites) + EDIT_EXTRA_CALLS


def _frames(harness: Harness, ctx: Context, edits: int, video_frames: int | None = None) -> int:
    """Frames per question of a harness at most ``edits`` heuristic edits away from ``harness``.

    Distinct frames shown cannot outnumber the video's: ``video_frames`` (the most any task's video holds) caps the
    compounded growth, which over 30 iterations would otherwise reach 1.7**30 (8 million) times the seed's frames.
    """
    frames = int(harness.config.get("n_frames") or harness.config.get("frames") or 64)
    grown = math.ceil(frames * FRAME_GROWTH ** min(edits, 200))
    caps = [c for c in (ctx.runtime.budget, video_frames) if c]
    return min([grown, *caps])


def _frame_tokens(harness: Harness, ctx: Context, size: tuple[int, int] | None) -> int:
    """Tokens of the largest frame a question may show (the cost model of the solver's family)."""
    width, height = size or (1280, 720)
    cfg = harness.config
    side = max(SHOWN_SIDE, int(cfg.get("max_side") or 0), int(cfg.get("cell_width") or 0))
    if "refine_max_side" in cfg:
        side = max(side, int(cfg["refine_max_side"]) or max(width, height))
    scale = min(1.0, side / max(width, height))
    cost = cost_model(ctx.model.family, ctx.model.max_pixels)
    return cost.image_tokens(max(1, round(width * scale)), max(1, round(height * scale)))


def most_frames(tasks: list[Task]) -> int | None:
    """The most frames any task's video holds, read from each header (no packet is read); None if one is unreadable."""
    from videvolve.errors import MediaError
    from videvolve.media.info import header_info

    try:
        return max((header_info(v).frames for v in {t.video for t in tasks}), default=None)
    except MediaError:
        return None


def estimate(ctx: Context, tasks: list[Task], harness: Harness, video_size: tuple[int, int] | None = None,
             video_frames: int | None = None) -> Plan:
    """The worst case of the run ``ctx`` starting from ``harness`` on ``tasks``.

    ``video_frames``: the most frames any task's video holds (None: unknown, frames grow uncapped).
    """
    train = sum(1 for t in tasks if t.split == "train")
    selection = sum(1 for t in tasks if t.split == "selection")
    batch = min(ctx.batch, train)
    k = ctx.candidates_per_iteration
    proposals = k if k > 1 else 1 + ctx.editor.repair_rounds  # a lone invalid candidate goes back to the editor
    trial_runs = 0
    if ctx.editor.kind == "heuristic" and not ctx.editor.no_trials:  # each operator, and a cheaper variant of each
        trial_runs = min(ctx.editor.trial_tasks, 2 * ctx.editor.trial_operators * min(ctx.editor.trial_batch, batch))
    elif ctx.editor.kind in ("agent", "command"):
        trial_runs = ctx.editor.trial_tasks
    smoke = min(ctx.editor.smoke_tasks, batch)
    if ctx.gate.validation == "multi-fidelity":  # nested rungs: each rung's evaluation counts all of its questions
        gate = sum(min(selection, math.ceil(r * selection)) for r in ctx.gate.rungs)
    else:
        gate = selection
    parent = selection if ctx.search == "mcts" else 0  # an expanded child's own selection results may be partial
    per_iter = batch + proposals * (trial_runs + smoke) + k * gate + parent
    versions = 1 + ctx.stop.iterations * k
    mixture = len(ctx.budgets) * versions * selection
    questions = selection + ctx.stop.iterations * per_iter + mixture
    cpq = calls_per_question(harness)
    investigator = batch * (PROBES_PER_FAILURE if ctx.investigator.kind == "procedure"
                            else 2 * ctx.investigator.rounds)
    editor = {"heuristic": 0, "llm": 1, "agent": ctx.editor.rounds + ctx.editor.probes,
              "command": ctx.editor.probes}[ctx.editor.kind] * proposals
    calls = questions * cpq + ctx.stop.iterations * (investigator + editor)
    # a harness run in iteration i is at most i edits from the seed (an incumbent of at most i - 1, and one more)
    def shown(edits: int) -> int:
        return _frames(harness, ctx, edits, video_frames)

    frames = selection * shown(0) + mixture * shown(ctx.stop.iterations) \
        + sum(per_iter * shown(i) for i in range(1, ctx.stop.iterations + 1))
    tokens = frames * _frame_tokens(harness, ctx, video_size)
    per_question_s, per_call_s = SECONDS.get(ctx.model.backend, SECONDS["openai"])
    seconds = (questions * per_question_s + calls * per_call_s) / max(1, ctx.runtime.concurrency)
    rows = [("train / selection tasks", f"{train} / {selection}"),
            ("question runs per iteration: batch + proposals x (trial runs + smoke) + candidates x gate",
             f"{batch} + {proposals} x ({trial_runs} + {smoke}) + {k} x {gate}" + (f" + {parent}" if parent else "")
             + f" = {per_iter}"),
            ("model calls per question (the seed's ask() sites + 1 for an edit's refinement pass)", f"{cpq}"),
            ("investigator and editor model calls per iteration", f"{investigator} + {editor}")]
    if mixture:
        rows.append(("mixture at the end: tiers x versions x selection questions",
                     f"{len(ctx.budgets)} x {versions} x {selection}"))
    notes = []
    if ctx.editor.kind in ("llm", "agent", "command"):
        notes.append(f"the {ctx.editor.kind} editor writes its own code: the bound assumes its harnesses ask at most "
                     f"{cpq} times per question; --max-calls caps the run whatever they do")
    return Plan(rows=rows, questions=questions, model_calls=calls, frames=frames, visual_tokens=tokens,
                seconds=seconds, calls_per_question=cpq, notes=notes)
