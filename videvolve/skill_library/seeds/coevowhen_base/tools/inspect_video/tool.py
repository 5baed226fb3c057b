"""inspect_video: a focused look at a clip."""


def run(ctx, start: float, end: float, question: str, fps: float = 2.0) -> dict:
    clip = ctx.clip(float(start), float(end), fps=float(fps))
    return {"text": ctx.ask([clip], prompt=str(question))}
