"""A look the catalogue can turn a scan into: detect cheaply, identify only where something is.

A contact sheet of small cells is cheap and still shows *whether* something is on screen, though not *what*; the
model's match pass flags those cells ("maybe": too small to read). One frame at up to 448 px identifies each
stretch of flagged cells (one per 6 cells of a longer stretch), boundary frames pin the stretches that match the
question's target, and the final look answers from the small sheets (which also say where nothing is) and those
frames. Where a plain scan pays full detail on every moment, this pays it once per stretch of something.

:func:`detect_identify` rewrites ``solver.py`` whole (this is a new look, not a step added to the old one) and
sets the keys the new solver reads; the parent's scan length and transcript mode (a kind's own too) carry over, and
so does what "windows" reads: around each scan moment for a parent that read around each of its frames (a scan of
frames), around the flagged stretches for one that read around the windows it refined (a contact-sheet scan). The
look read around the flagged stretches alone before, and a speaking world's words-only questions, which nothing on
screen flags, lost their evidence (world 221449: -0.31 on the test split's grounding questions needing both).
:func:`from_sheets` applies it to a contact-sheet scan (a cost cut), :func:`from_frames` to a scan of frames.
"""

from __future__ import annotations

from typing import Any

from videvolve.editing.file_edits import Files, frame_key, set_key

MARKER = "def _stretches("
"""Present in a solver this move already made."""

DETECT_CELL_WIDTH = 96
"""Detection cells' width in pixels: a third of a 320-pixel frame's side, a ninth of its tokens."""

MAX_IDENTIFY = 64
"""At most this many identification frames a question (footage where something is always on screen flags every
cell)."""

MIN_MOMENTS = 64
"""The fewest scan moments the move turns into a detection scan: over fewer, each moment is a stretch of its own, and
identifying every one costs what showing each at full detail would (a 16-frame uniform harness became a look that
cost 3.8x its tokens, and displaced the moves its diagnoses called for)."""

IDENTIFY_SIDE = 448
"""The longer side identification frames of a uniform scan's descendant are shown at (``add_refinement``'s)."""

SOLVER = '''"""Detect, then identify.

A contact-sheet scan of small cells shows where something is on screen (cells the model flags, too small to
read) and where nothing is; one frame at full resolution identifies each stretch of flagged cells; boundary frames
pin the stretches that match the question's target; the final look answers from the sheets and those frames.
"""

from videvolve_sdk import HarnessContext, Observation, TaskView


def _cfg(ctx, task):
    """The config, with this question kind's own settings (config.toml's mcq.* / grounding.* keys) over it."""
    merged = dict(ctx.config)
    merged.update(ctx.config.get(task.kind) or {})
    return merged


def _target(task: TaskView) -> str:
    text = "what this question is about: " + task.question
    if task.options:
        text += " (options: " + "; ".join(task.options) + ")"
    return text


def _stretches(times: list, step: float) -> list:
    """Flagged moments grouped into stretches of consecutive scan cells."""
    groups: list = []
    for t in sorted(times):
        if groups and t - groups[-1][-1] <= step * 1.01:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


def _chunks(stretch: list, every: int) -> list:
    """The middle cell of each run of ``every`` cells of a stretch (at least one)."""
    k = max(1, -(-len(stretch) // every))
    return [stretch[min(len(stretch) - 1, (2 * j + 1) * len(stretch) // (2 * k))] for j in range(k)]


def _windows(times: list, width: float) -> list:
    """The stretches within ``width`` seconds of the scan's moments, overlapping ones merged."""
    out: list = []
    for t in sorted(times):
        if out and t - width <= out[-1][1]:
            out[-1] = (out[-1][0], t + width)
        else:
            out.append((t - width, t + width))
    return out


def _transcript(ctx: HarnessContext, task: TaskView, cfg: dict, windows: list) -> str | None:
    """The transcript of the whole video or of ``windows``, as prompt text (config ``transcript``)."""
    mode = str(cfg.get("transcript", "none"))
    if mode == "video":
        windows = [(0.0, task.duration)]
    elif mode != "windows":
        return None
    segments: dict = {}
    for lo, hi in windows:
        for s in ctx.transcript(max(0.0, lo), min(task.duration, hi)):
            segments[(s["start"], s["end"])] = s["text"]
    if not segments:
        return None
    lines = [f"[{a:.1f}-{b:.1f} s] {text}" for (a, b), text in sorted(segments.items())]
    return "Transcript of what is said (times in seconds):\\n" + "\\n".join(lines)


def solve(task: TaskView, ctx: HarnessContext) -> dict:
    cfg = _cfg(ctx, task)
    n_scan = int(cfg.get("frames", 218))
    limit = int(cfg.get("max_identify", 64))
    if ctx.budget:  # a per-question frame cap from the run: the scan takes three quarters of it, the rest after
        n_scan = min(n_scan, max(4, int(ctx.budget) * 3 // 4))
        limit = min(limit, max(0, int(ctx.budget) - n_scan))
    cols = int(cfg.get("sheet_cols", 8))
    side = int(cfg.get("refine_max_side", 0)) or None
    step = task.duration / n_scan
    scan_times = [step * (i + 0.5) for i in range(n_scan)]
    per_sheet = cols * cols
    sheets = [ctx.sheet(scan_times[i:i + per_sheet], cols=cols, cell_width=int(cfg.get("cell_width", 96)))
              for i in range(0, n_scan, per_sheet)]
    seen: list[Observation] = list(sheets)
    found = ctx.parse_match(ctx.ask(sheets, mode="match", target=_target(task)))
    stretches = _stretches(sorted(set(found["yes"]) | set(found["maybe"])), step)
    every = max(1, int(cfg.get("identify_every", 6)))
    looks = [_chunks(g, every) for g in stretches][:limit]  # one frame per `every` flagged cells of a stretch
    middles = [t for c in looks for t in c][:limit]
    hits: list = []
    if middles:
        identified = ctx.frames(middles, max_side=side)
        seen += identified
        hits = ctx.parse_match(ctx.ask(identified, mode="match", target=_target(task)))["yes"]
    b = int(cfg.get("boundary_frames", 2))
    edges: list = []
    for g, c in zip(stretches, looks):
        if b <= 0 or not set(c) & set(hits):
            continue
        lo, hi = g[0] - step, g[-1] + step
        edges += [lo + (g[0] - lo) * (j + 1) / (b + 1) for j in range(b)]
        edges += [g[-1] + (hi - g[-1]) * (j + 1) / (b + 1) for j in range(b)]
        if len(g) > 1:  # the stretch's own ends, read clearly
            edges += [g[0], g[-1]]
    room = 128 if not ctx.budget else max(0, int(ctx.budget) - n_scan - len(middles))
    edges = sorted({round(t, 3) for t in edges if 0 <= t <= task.duration} - set(middles))[:room]
    if edges:
        seen += ctx.frames(edges, max_side=side)
    if "transcript_window" in cfg:  # its parent read around each frame of its scan: so does this look
        windows = _windows(scan_times, float(cfg["transcript_window"]))
    else:  # its parent read around the candidate windows it refined: these are the flagged stretches
        windows = [(g[0] - step, g[-1] + step) for g in stretches]
    reply = ctx.ask(seen, context=_transcript(ctx, task, cfg, windows))
    return {"answer": reply, "raw": reply, "evidence_times": sorted(hits) or middles}
'''

CONFIG = '''# Detect, then identify (a look made by the catalogue's detect_identify / identify_flagged moves)
# moments in the detection scan (contact-sheet cells)
frames = {frames}
sheet_cols = 8
# detection cells' width in pixels: small enough to be cheap, large enough to show that something is there
cell_width = {cell_width}
# one identification frame per this many flagged cells of a stretch (at least one a stretch)
identify_every = 6
# at most this many identification frames a question
max_identify = {max_identify}
# longer side of identification and boundary frames in pixels (0: full resolution)
refine_max_side = {side}
# frames per side used to pin each boundary of a stretch that matches the question's target
boundary_frames = {boundary}
# the transcript added to the final prompt: "none", "video" (all of it) or "windows" (what is said around the
# stretches flagged; with transcript_window, within that many seconds of each scan moment)
transcript = {transcript!r}
'''


def scan_moments(cfg: dict[str, Any]) -> int | None:
    """How many moments the parent's scan looks at: a contact-sheet scan's share of its frames, or every frame."""
    key = frame_key(cfg)
    if key is None:
        return None
    n = int(cfg[key])
    return max(4, int(n * float(cfg["scan_share"]))) if "scan_share" in cfg else n


def detect_identify(files: Files, cfg: dict[str, Any]) -> Files | None:
    """The parent's scan (as many moments) made a detection scan of small cells with identification where flagged.

    None where the solver is already this look, or the config has no frame count to carry over, or too few of them
    (:data:`MIN_MOMENTS`).
    """
    if MARKER in files.get("solver.py", "") or (n := scan_moments(cfg)) is None or n < MIN_MOMENTS:
        return None
    if int(cfg.get("cell_width", 10**6)) <= DETECT_CELL_WIDTH:
        return None  # its cells are already this small: nothing cheaper to detect with
    side = int(cfg["refine_max_side"]) if "refine_max_side" in cfg else IDENTIFY_SIDE
    text = CONFIG.format(frames=n, cell_width=DETECT_CELL_WIDTH,
                         max_identify=MAX_IDENTIFY, side=side, boundary=int(cfg.get("boundary_frames", 2)),
                         transcript=str(cfg.get("transcript", "none")))
    if "transcript_window" in cfg:  # a parent that read around each of its frames
        text = set_key(text, "transcript_window", float(cfg["transcript_window"]))
    for kind in ("mcq", "grounding"):  # a kind's own transcript mode carries over; its frame settings do not
        own = cfg.get(kind)
        if isinstance(own, dict) and "transcript" in own:
            text = set_key(text, f"{kind}.transcript", str(own["transcript"]))
    return {"solver.py": SOLVER, "config.toml": text}


def from_sheets(files: Files, cfg: dict[str, Any]) -> Files | None:
    """:func:`detect_identify` for a contact-sheet scan (``scan_refine`` and its descendants): a cost cut."""
    return detect_identify(files, cfg) if "cell_width" in cfg else None


def from_frames(files: Files, cfg: dict[str, Any]) -> Files | None:
    """:func:`detect_identify` for a scan of frames (``uniform`` and its descendants): more detail where it matters."""
    return detect_identify(files, cfg) if "cell_width" not in cfg else None
