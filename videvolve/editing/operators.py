"""The heuristic editor's catalogue: bounded, parametric revisions of a harness's own files.

Each operator names the diagnosis categories it addresses (with a weight) and turns the incumbent's files into
new ones, or says it does not apply. Edits are real, incremental diffs: a config value changed within bounds, a
policy sentence added, or a refinement step inserted into ``solver.py`` at a known anchor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from videvolve.editing.file_edits import Files, config_of, frame_key, routed, set_key
from videvolve.editing.identify_look import IDENTIFY_SIDE, MARKER, from_frames, from_sheets
from videvolve.editing.scan_looks import BISECT_ROUNDS, bisect_boundaries, final_look_flagged
from videvolve.memory.records import Category
from videvolve.skill_library.limits import MAX_REQUEST_OBSERVATIONS

__all__ = ["CATALOGUE", "OPERATORS", "Files", "Operator", "config_of", "frame_key", "routed", "scale_frames",
           "set_key"]


@dataclass(frozen=True)
class Operator:
    """One kind of revision.

    ``weights``: how much each diagnosis category calls for it; ``apply``: the incumbent's files and parsed
    ``config.toml`` to the files it changes (None: it does not apply); ``kinds``: the question kinds whose diagnoses
    call for it (all when empty); ``cost_cut``: a move down the cost axis, which the editor tries beside the
    diagnoses' choices when the incumbent is expensive. An edit must stay within what ``evolve --dry-run`` assumes
    of one edit (``graph/plan.py``: ``FRAME_GROWTH``, ``SHOWN_SIDE``; ``tests/test_operators_routing.py`` checks).
    """

    name: str
    summary: str
    weights: dict[Category, float]
    apply: Callable[[Files, dict[str, Any]], Files | None]
    kinds: tuple[str, ...] = ()
    cost_cut: bool = False


def _raise_resolution(files: Files, cfg: dict[str, Any]) -> Files | None:
    if MARKER in files.get("solver.py", ""):  # detect, then identify: its cells only detect, its frames identify
        side = int(cfg.get("refine_max_side", 0))
        if not 0 < side < IDENTIFY_SIDE:
            return None
        return {"config.toml": set_key(files["config.toml"], "refine_max_side", min(IDENTIFY_SIDE, side * 3 // 2))}
    if cfg.get("max_side"):
        side = int(cfg["max_side"])
        if side >= 320:
            return None
        return {"config.toml": set_key(files["config.toml"], "max_side", min(320, side * 3 // 2))}
    if "cell_width" in cfg and int(cfg["cell_width"]) < 320:
        return {"config.toml": set_key(files["config.toml"], "cell_width", min(320, int(cfg["cell_width"]) + 80))}
    return None


def scale_frames(factor: float, kinds: tuple[str, ...] = ()) -> Callable[[Files, dict[str, Any]], Files | None]:
    """An edit that scales the harness's frame count (``n_frames`` or ``frames``) by ``factor``.

    ``n_frames`` counts the frames of one request (a uniform solver's): it grows no further than a request may show
    (:data:`~videvolve.skill_library.limits.MAX_REQUEST_OBSERVATIONS`, which the parent enforces), so the edit does
    not apply to a harness already there. ``frames`` (a scan's budget, shown in contact sheets) has no such cap.

    With ``kinds``, only those question kinds' counts (``mcq.n_frames = ...``; the solver must read its settings
    per kind, see :func:`routed`); otherwise the shared count and every kind's own.
    """
    def apply(files: Files, cfg: dict[str, Any]) -> Files | None:
        key = frame_key(cfg)
        if key is None:
            return None
        text = files["config.toml"]
        targets = [(f"{k}.{key}", (cfg.get(k) or {}).get(key, cfg[key])) for k in kinds] if kinds else \
            [(key, cfg[key])] + [(f"{k}.{key}", cfg[k][key]) for k in ("mcq", "grounding")
                                 if isinstance(cfg.get(k), dict) and key in cfg[k]]
        changed = False
        for name, value in targets:
            new = max(4, int(int(value) * factor))
            if key == "n_frames" and factor > 1:  # all of them go in one request: no more than it may show
                new = min(new, max(int(value), MAX_REQUEST_OBSERVATIONS))
            if new != int(value):
                text, changed = set_key(text, name, new), True
        if not changed:
            return None
        out = {"config.toml": text}
        if kinds:
            route = routed(files)
            if route is None:
                return None
            out.update(route)
        return out

    return apply


SCAN_ANCHOR = '''    times = [task.duration * (i + 0.5) / n for i in range(n)]
    frames = ctx.frames(times, max_side=ctx.config.get("max_side"))
    reply = ctx.ask(frames'''  # whatever else ask is given (a transcript) stays
SCAN_REFINED = '''    refine = int(n * float(ctx.config.get("refine_share", 0.0)))
    scan = n - refine
    times = [task.duration * (i + 0.5) / scan for i in range(scan)]
    frames = ctx.frames(times, max_side=ctx.config.get("max_side"))
    if refine > 0:
        frames = frames + _refine(task, ctx, frames, times, refine)
    reply = ctx.ask(frames'''
REFINE_FUNCTION = '''

def _refine(task, ctx, frames, times, budget):
    """Local dense resampling, at up to ``refine_max_side`` pixels (0: full resolution), around flagged moments."""
    target = "what this question is about: " + task.question
    if task.options:
        target += " (options: " + "; ".join(task.options) + ")"
    found = ctx.parse_match(ctx.ask(frames, mode="match", target=target))
    step = task.duration / max(1, len(times))
    window = max(1, int(ctx.config.get("refine_window", 4)))
    picks = sorted(set(found["yes"]) | set(found["maybe"]))[: max(1, budget // window)]
    extra = []
    for c in picks:
        extra += [c - step / 2 + step * (j + 0.5) / window for j in range(window)]
    extra = [t for t in extra if 0 <= t <= task.duration][:budget]
    return ctx.frames(extra, max_side=int(ctx.config.get("refine_max_side", 0)) or None) if extra else []
'''


REFINE_SIDE = 448
"""The largest side ``add_refinement`` shows a refined frame at (``scan_refine``'s ``refine_max_side``)."""


def _add_refinement(files: Files, cfg: dict[str, Any]) -> Files | None:
    solver = files.get("solver.py", "")
    if SCAN_ANCHOR not in solver or "_refine(" in solver:
        return None
    config = set_key(set_key(files["config.toml"], "refine_share", 0.25), "refine_window", 4)
    if "refine_max_side" not in cfg:  # scan_refine's: a 1080p frame at full size costs about 18x as many tokens
        config = set_key(config, "refine_max_side", REFINE_SIDE)
    return {"solver.py": solver.replace(SCAN_ANCHOR, SCAN_REFINED).rstrip("\n") + "\n" + REFINE_FUNCTION,
            "config.toml": config}


def _sharper_boundaries(files: Files, cfg: dict[str, Any]) -> Files | None:
    if "boundary_frames" in cfg and int(cfg["boundary_frames"]) < 4:
        return {"config.toml": set_key(files["config.toml"], "boundary_frames", int(cfg["boundary_frames"]) + 1)}
    if "refine_window" in cfg and int(cfg["refine_window"]) < 8:
        return {"config.toml": set_key(files["config.toml"], "refine_window", int(cfg["refine_window"]) + 2)}
    return None


def _more_refinement(files: Files, cfg: dict[str, Any]) -> Files | None:
    if "refine_share" in cfg and float(cfg["refine_share"]) < 0.5:
        return {"config.toml": set_key(files["config.toml"], "refine_share",
                                       round(float(cfg["refine_share"]) + 0.1, 2))}
    if "max_candidates" in cfg and int(cfg["max_candidates"]) < 32:
        return {"config.toml": set_key(files["config.toml"], "max_candidates", int(cfg["max_candidates"]) + 4)}
    return None


FORMAT_RULE = ("\nAlways end with the answer alone: one option letter for a multiple-choice question, or a JSON "
               "list of [start, end] intervals in seconds ([] if it never happens).\n")


def _stricter_format(files: Files, cfg: dict[str, Any]) -> Files | None:
    skill = files.get("SKILL.md", "")
    return None if FORMAT_RULE.strip() in skill else {"SKILL.md": skill.rstrip("\n") + "\n" + FORMAT_RULE}


def _read_transcript(files: Files, cfg: dict[str, Any]) -> Files | None:
    mode = cfg.get("transcript")
    if mode not in ("none", "windows"):  # a harness without the switch, or one that already reads everything
        return None
    return {"config.toml": set_key(files["config.toml"], "transcript", "windows" if mode == "none" else "video")}


def _refine_mcq_only(files: Files, cfg: dict[str, Any]) -> Files | None:
    """Refinement for mcq questions only, with fewer mcq frames to pay for it; grounding keeps its plain scan."""
    key = frame_key(cfg)
    if key is None or (cfg.get("grounding") or {}).get("refine_share") == 0.0:
        return None
    merged = dict(files)
    if "_refine(" not in files.get("solver.py", ""):
        added = _add_refinement(files, cfg)
        if added is None:
            return None
        merged.update(added)
    route = routed(merged)
    if route is None:
        return None
    merged.update(route)
    text = set_key(merged["config.toml"], "grounding.refine_share", 0.0)
    n = int((cfg.get("mcq") or {}).get(key, cfg[key]))
    text = set_key(text, f"mcq.{key}", max(4, round(n / 1.75)))
    merged["config.toml"] = text
    return {k: v for k, v in merged.items() if files.get(k) != v}


def _lowres_denser(kinds: tuple[str, ...]) -> Callable[[Files, dict[str, Any]], Files | None]:
    """Frames at 3/4 of the side and 1.7x as many (about the same tokens): more moments, less detail."""
    def apply(files: Files, cfg: dict[str, Any]) -> Files | None:
        key = frame_key(cfg)
        if key is None or not cfg.get("max_side"):
            return None
        own = {k: (cfg.get(k) or {}) for k in kinds}
        side = min(int(own[k].get("max_side", cfg["max_side"])) for k in kinds)
        if side * 3 // 4 < 64:
            return None
        route = routed(files)
        if route is None:
            return None
        text = files["config.toml"]
        for k in kinds:
            n = int(own[k].get(key, cfg[key]))
            more = round(n * 1.7) if key != "n_frames" else min(round(n * 1.7), MAX_REQUEST_OBSERVATIONS)
            if more < n * 1.2:  # one request cannot show that many more frames: not this move
                return None
            text = set_key(text, f"{k}.max_side", int(own[k].get("max_side", cfg["max_side"])) * 3 // 4)
            text = set_key(text, f"{k}.{key}", more)
        return {**route, "config.toml": text}

    return apply


def _smaller_cells(files: Files, cfg: dict[str, Any]) -> Files | None:
    """Contact-sheet cells at 2/3 of their width (a sheet costs less than half): what they blur is refined."""
    if "cell_width" not in cfg or int(cfg["cell_width"]) * 2 // 3 < 96:
        return None
    return {"config.toml": set_key(files["config.toml"], "cell_width", int(cfg["cell_width"]) * 2 // 3)}


def _fewer_sheet_frames(files: Files, cfg: dict[str, Any]) -> Files | None:
    """A sparser contact-sheet scan, scan_share down by 0.25; the budget left goes to refining candidates.

    About the gate's 20 % cost cut when the sheets are most of the cost.
    """
    if "scan_share" not in cfg or float(cfg["scan_share"]) < 0.5:
        return None
    return {"config.toml": set_key(files["config.toml"], "scan_share", round(float(cfg["scan_share"]) - 0.25, 2))}


CATALOGUE: tuple[Operator, ...] = (
    Operator("raise_resolution", "show frames (or sheet cells; a detect-then-identify look's identification frames) "
             "at 1.5x the resolution, same frame count",
             {"misperception": 1.0, "unresolved": 0.2}, _raise_resolution),
    Operator("add_refinement", "add local dense resampling at up to 448 px around flagged moments (25 % "
             "of the frames), frame count unchanged", {"boundary_error": 1.0, "missed_event": 0.4,
                                                   "evidence_unused": 0.3, "misperception": 0.3}, _add_refinement),
    Operator("denser_sampling", "10 % more frames (frames sent in one request: no more than one request may show)",
             {"missed_event": 1.0, "unresolved": 0.3}, scale_frames(1.1)),
    Operator("sharper_boundaries", "more frames around each boundary", {"boundary_error": 0.8}, _sharper_boundaries),
    Operator("more_refinement", "give refinement a larger share (or more candidates)",
             {"missed_event": 0.5, "evidence_unused": 0.6, "boundary_error": 0.3}, _more_refinement),
    Operator("stricter_format", "state the answer format in the policy", {"format_error": 1.0}, _stricter_format),
    Operator("read_transcript", "read the transcript around candidate moments (transcript = \"windows\"; then "
             "all of it)", {"transcript_unused": 1.0}, _read_transcript),
    Operator("refine_mcq_only", "route by question kind: mcq questions get full-resolution refinement around "
             "the moments a match pass flags, with fewer scan frames to pay for it; grounding keeps its even scan",
             {"misperception": 1.0, "unresolved": 0.4, "evidence_unused": 0.4}, _refine_mcq_only, kinds=("mcq",)),
    Operator("grounding_lowres_denser", "route by question kind: grounding frames at 3/4 of the side and 1.7x as "
             "many (about the same tokens), so boundaries are pinned more finely", {"boundary_error": 1.0,
                                                                                   "missed_event": 0.6},
             _lowres_denser(("grounding",)), kinds=("grounding",)),
    Operator("mcq_lowres_denser", "route by question kind: mcq frames at 3/4 of the side and 1.7x as many, so "
             "short events are not missed (counting, order, what comes next)", {"missed_event": 1.0},
             _lowres_denser(("mcq",)), kinds=("mcq",)),
    Operator("bisect_boundaries", "route by question kind: grounding pins each boundary of what refinement found "
             f"by bisection ({BISECT_ROUNDS} match rounds of one frame per boundary), and pays for it with a final "
             "look at the scan cells within 2 of a flagged moment instead of every contact sheet (a cost cut that "
             "looks more closely where it matters)",
             {"boundary_error": 1.0}, bisect_boundaries, kinds=("grounding",), cost_cut=True),
    Operator("final_look_flagged", "route by question kind: the final look re-sends the contact sheets only "
             "where the scan flagged something (mcq: the sheets holding a flagged moment; grounding: the cells within "
             "2 of one, in a smaller sheet), with the refinement frames, and mcq questions skip the boundary pass "
             "(an mcq answer has no interval to pin) (a cost cut: the match pass already read the rest)",
             {"budget_exhausted": 0.6}, final_look_flagged, kinds=("mcq", "grounding"), cost_cut=True),
    Operator("identify_flagged", "a new look: a contact-sheet scan of small cells (as many moments) shows where "
             "something is on screen, one frame at up to 448 px identifies each stretch the match pass flags, and "
             "boundary frames pin those that match the target (more detail where something is; costs more)",
             {"misperception": 1.0, "unresolved": 0.4, "missed_event": 0.3}, from_frames),
    Operator("detect_identify", "a new look: the contact sheets at 96-px cells, which show where something is but "
             "not what, and one refinement frame identifying each stretch the match pass flags, boundary frames "
             "pinning those that match the target, instead of the candidate windows (a cost cut: full detail only "
             "where something is)", {"budget_exhausted": 0.8}, from_sheets, cost_cut=True),
    Operator("sparser_sampling", "20 % fewer frames (a cost cut)", {"budget_exhausted": 1.0, "crash": 0.2},
             scale_frames(0.8), cost_cut=True),
    Operator("smaller_cells", "contact-sheet cells at 2/3 of their width (a cost cut: what they blur is refined "
             "at full resolution)", {"budget_exhausted": 0.5}, _smaller_cells, cost_cut=True),
    Operator("sparser_scan", "a sparser contact-sheet scan, the budget left to refinement (a cost cut when the "
             "candidates are few)", {"budget_exhausted": 0.3}, _fewer_sheet_frames, cost_cut=True),
)
OPERATORS = {op.name: op for op in CATALOGUE}
