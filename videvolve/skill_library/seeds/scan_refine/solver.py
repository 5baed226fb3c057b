"""Scan, then refine.

A contact-sheet scan finds candidate moments; dense full-resolution frames around them read the glyphs and pin
the boundaries; a final look over everything answers.
"""

from videvolve_sdk import HarnessContext, Observation, TaskView


def _transcript(ctx: HarnessContext, task: TaskView, windows: list) -> str | None:
    """The transcript of the whole video or of the windows looked at, as prompt text (config ``transcript``)."""
    mode = str(ctx.config.get("transcript", "none"))
    if mode == "video":
        windows = [(0.0, task.duration)]
    elif mode != "windows":
        return None
    merged: list = []
    for lo, hi in sorted(windows):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    segments: dict = {}
    for lo, hi in merged:
        for s in ctx.transcript(lo, hi):
            segments[(s["start"], s["end"])] = s["text"]
    if not segments:
        return None
    lines = [f"[{a:.1f}-{b:.1f} s] {text}" for (a, b), text in sorted(segments.items())]
    return "Transcript of what is said (times in seconds):\n" + "\n".join(lines)


def _target(task: TaskView) -> str:
    text = "what this question is about: " + task.question
    if task.options:
        text += " (options: " + "; ".join(task.options) + ")"
    return text


def _merge(times: list, gap: float) -> list:
    groups: list = []
    for t in sorted(times):
        if groups and t - groups[-1][-1] <= gap:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


def solve(task: TaskView, ctx: HarnessContext) -> dict:
    cfg = ctx.config
    total = int(cfg.get("frames", 64))
    if ctx.budget:  # a per-question frame cap from the run: spend at most that
        total = min(total, int(ctx.budget))
    n_scan = max(4, int(total * float(cfg.get("scan_share", 0.6))))
    cols = int(cfg.get("sheet_cols", 8))
    side = int(cfg.get("refine_max_side", 0)) or None
    step = task.duration / n_scan
    scan_times = [step * (i + 0.5) for i in range(n_scan)]
    per_sheet = cols * cols
    sheets = [ctx.sheet(scan_times[i:i + per_sheet], cols=cols, cell_width=int(cfg.get("cell_width", 160)))
              for i in range(0, n_scan, per_sheet)]
    seen: list[Observation] = list(sheets)
    found = ctx.parse_match(ctx.ask(sheets, mode="match", target=_target(task)))
    candidates = sorted(set(found["yes"]) | set(found["maybe"]))
    groups = _merge(candidates, step * 1.01)[: int(cfg.get("max_candidates", 8))]
    left = total - n_scan
    looked = [(g[0] - step / 2, g[-1] + step / 2) for g in groups]  # the windows refined (and read, if configured)
    if groups and left > 0:
        k = max(1, min(int(cfg.get("window_frames", 4)), left // len(groups)))
        times = []
        for g in groups:
            lo, hi = g[0] - step / 2, g[-1] + step / 2
            times += [lo + (hi - lo) * (j + 0.5) / k for j in range(k)]
        times = [t for t in times if 0 <= t <= task.duration][:left]
        window = ctx.frames(times, max_side=side)
        seen += window
        left -= len(window)
        hits = ctx.parse_match(ctx.ask(window, mode="match", target=_target(task)))["yes"]
        b = int(cfg.get("boundary_frames", 2))
        if hits and left > 0 and b > 0:
            observed = sorted(set(scan_times) | set(times))
            edges = []
            for run in _merge(hits, step):
                before = [t for t in observed if t < run[0]]
                after = [t for t in observed if t > run[-1]]
                if before:
                    edges += [before[-1] + (run[0] - before[-1]) * (j + 1) / (b + 1) for j in range(b)]
                if after:
                    edges += [run[-1] + (after[0] - run[-1]) * (j + 1) / (b + 1) for j in range(b)]
            edges = edges[:left]
            if edges:
                seen += ctx.frames(edges, max_side=side)
    reply = ctx.ask(seen, context=_transcript(ctx, task, looked))
    return {"answer": reply, "raw": reply, "evidence_times": candidates}
