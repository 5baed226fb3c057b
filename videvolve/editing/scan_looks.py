"""Moves on how a scan-then-refine solver (``scan_refine`` and its descendants) looks: its final look, its boundaries.

Each rewrites ``solver.py`` at anchors of that solver's code and sets the per-kind keys the rewritten code reads;
each returns None where the anchors are missing (another solver, or the move already made).
"""

from __future__ import annotations

from typing import Any

from videvolve.editing.file_edits import Files, routed, set_key
from videvolve.editing.identify_look import MARKER as IDENTIFY_MARKER

FINAL_ANCHOR = "    reply = ctx.ask(seen, context="
FINAL_LOOK = '''    look = str(cfg.get("final_look", "all"))
    if look != "all" and candidates:  # the final look: the scan where it flagged something, and the refinement
        seen = _final_sheets(ctx, cfg, look, sheets, scan_times, candidates, step, per_sheet, cols) + seen[len(sheets):]
'''
FINAL_SHEETS = '''

def _final_sheets(ctx, cfg, look, sheets, scan_times, candidates, step, per_sheet, cols):
    """The contact sheets of the final look: those holding a flagged moment, or a sheet of the cells near one."""
    if look == "flagged_sheets":
        spans = [(scan_times[i] - step, scan_times[min(len(scan_times), i + per_sheet) - 1] + step)
                 for i in range(0, len(scan_times), per_sheet)]
        return [s for s, (lo, hi) in zip(sheets, spans) if any(lo <= c <= hi for c in candidates)]
    reach = float(cfg.get("final_near_cells", 3)) * step
    near = [t for t in scan_times if any(abs(t - c) <= reach for c in candidates)]
    return [ctx.sheet(near[i:i + per_sheet], cols=cols, cell_width=int(cfg.get("cell_width", 160)))
            for i in range(0, len(near), per_sheet)]
'''
FINAL_LOOKS = {"mcq": ("flagged_sheets", None), "grounding": ("near_cells", 2)}
"""The final look per question kind: an mcq question (order, counting, what comes next) keeps every contact sheet
that holds a flagged moment, whole; a grounding question keeps only the scan cells within 2 of a flagged moment, in
a new smaller sheet: enough to pin the boundaries, which refinement already sampled densely."""
HITS_ASK = '''        hits = ctx.parse_match(ctx.ask(window, mode="match", target=_target(task)))["yes"]
        b = int(cfg.get("boundary_frames", 2))
'''
HITS_IF_USED = '''        b = int(cfg.get("boundary_frames", 2))
        hits = ctx.parse_match(ctx.ask(window, mode="match", target=_target(task)))["yes"] if b > 0 else []
'''


def final_look_flagged(files: Files, cfg: dict[str, Any]) -> Files | None:
    """The final look re-sends the scan only where it flagged something (the match pass already read the rest)."""
    solver = files.get("solver.py", "")
    if FINAL_ANCHOR not in solver or "_final_sheets(" in solver or "scan_times" not in solver or \
            IDENTIFY_MARKER in solver:  # the detect-then-identify look's sheets are what says where nothing is
        return None
    body = solver.replace(FINAL_ANCHOR, FINAL_LOOK + FINAL_ANCHOR, 1).replace(HITS_ASK, HITS_IF_USED, 1)
    body = body.rstrip("\n") + "\n" + FINAL_SHEETS
    route = routed({**files, "solver.py": body})
    if route is None:
        return None
    text = files["config.toml"]
    for kind, (look, cells) in FINAL_LOOKS.items():
        text = set_key(text, f"{kind}.final_look", look)
        if cells is not None:
            text = set_key(text, f"{kind}.final_near_cells", cells)
    if HITS_IF_USED in body:  # boundaries pin intervals: an mcq answer has none
        text = set_key(text, "mcq.boundary_frames", 0)
    return {"solver.py": route.get("solver.py", body), "config.toml": text}


HITS_KEPT = "        found, window_times = hits, [o.times[0] for o in window]\n"
FOUND_INIT = "    found, window_times = [], []  # what the refinement's match pass found, and where it looked\n"
LOOKED_ANCHOR = "    looked = [(g[0] - step / 2, g[-1] + step / 2) for g in groups]"
BISECT_CALL = '''    if int(cfg.get("bisect_rounds", 0)) > 0 and found:  # pin the boundaries of what was found
        seen += _bisect(ctx, task, cfg, scan_times, candidates, window_times, found, step, side)
'''
BISECT = '''

def _bisect(ctx, task, cfg, scan_times, candidates, window_times, found, step, side):
    """Pin each boundary of the target's runs by bisection: one frame halfway between the last moment seen without
    the target and the first seen with it, all boundaries in one match request per round (``bisect_rounds``)."""
    def near(t, times):
        return any(abs(t - u) < 0.05 for u in times)

    without = sorted([t for t in scan_times if not near(t, candidates)] +
                     [t for t in window_times if not near(t, found)])
    brackets = []  # [absent at, present at, settled]
    for run in _merge(sorted(set(found)), step):
        before = [t for t in without if t < run[0]]
        after = [t for t in without if t > run[-1]]
        if before:
            brackets.append([before[-1], run[0], False])
        if after:
            brackets.append([after[0], run[-1], False])
    shown = []
    for _ in range(int(cfg.get("bisect_rounds", 0))):
        open_ = [k for k, (a, b, settled) in enumerate(brackets) if not settled and abs(a - b) > 0.2]
        if ctx.budget:  # a per-question frame cap from the run: spend only what is left of it
            open_ = open_[:max(0, int(ctx.budget) - int(ctx.usage().get("frames", 0)))]
        if not open_:
            break
        frames = ctx.frames([(brackets[k][0] + brackets[k][1]) / 2 for k in open_], max_side=side)
        shown += frames
        reply = ctx.parse_match(ctx.ask(frames, mode="match", target=_target(task)))
        for k, o in zip(open_, frames):
            t = o.times[0]
            if near(t, reply["yes"]):
                brackets[k][1] = t
            elif near(t, reply["maybe"]):
                brackets[k][2] = True  # unclear: this boundary stays where it is
            else:
                brackets[k][0] = t
    return shown
'''
BISECT_ROUNDS = 3
"""Bisection rounds per boundary: each halves the gap between a frame without the target and one with it."""


def bisect_boundaries(files: Files, cfg: dict[str, Any]) -> Files | None:
    """Grounding pins boundaries by bisection, and pays for it with a final look at the scan near flagged moments."""
    solver = files.get("solver.py", "")
    hits_line = next((h for h in (HITS_ASK, HITS_IF_USED) if h in solver), None)
    if hits_line is None or LOOKED_ANCHOR not in solver or "def _bisect(" in solver or "def _merge(" not in solver:
        return None
    merged = dict(files)
    if "_final_sheets(" not in solver:
        looked = final_look_flagged(files, cfg)
        if looked is None:
            return None
        merged.update(looked)
    body = merged["solver.py"]
    hits_line = next(h for h in (HITS_ASK, HITS_IF_USED) if h in body)
    body = body.replace(hits_line, hits_line + HITS_KEPT, 1).replace(LOOKED_ANCHOR, FOUND_INIT + LOOKED_ANCHOR, 1)
    final_first = FINAL_LOOK.splitlines(keepends=True)[0]  # bisection frames join the final look
    body = body.replace(final_first, BISECT_CALL + final_first, 1)
    body = body.rstrip("\n") + "\n" + BISECT
    text = files["config.toml"]  # only grounding changes: mcq keeps the look it had
    text = set_key(text, "grounding.final_look", "near_cells")
    text = set_key(text, "grounding.final_near_cells", FINAL_LOOKS["grounding"][1])
    text = set_key(text, "grounding.bisect_rounds", BISECT_ROUNDS)
    return {"solver.py": body, "config.toml": text}
