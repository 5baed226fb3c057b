"""extract_video_clip: a short clip."""


def run(ctx, start: float, end: float, fps: float = 2.0) -> dict:
    clip = ctx.clip(float(start), float(end), fps=float(fps))
    return {"text": f"clip of {len(clip.times)} frame(s) follows", "observations": [clip]}
