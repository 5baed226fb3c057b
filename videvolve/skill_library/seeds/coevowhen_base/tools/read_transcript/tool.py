"""read_transcript: what is said in a window, or where a phrase is said."""


def run(ctx, start: float = 0.0, end: float = -1.0, search: str = "") -> dict:
    if search:
        hits = ctx.search_transcript(str(search))[:50]
        if not hits:
            return {"text": f"{search!r} is not said in the transcript (or the video has no transcript)"}
        return {"text": f"{search!r} is said at: " + ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in hits)}
    segments = ctx.transcript(float(start), None if float(end) < 0 else float(end))[:200]
    if not segments:
        return {"text": "nothing is said in that window (or the video has no transcript)"}
    return {"text": "\n".join(f"[{s['start']:.1f}-{s['end']:.1f} s] {s['text']}" for s in segments)}
