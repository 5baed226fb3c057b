"""inspect_images: a focused look at some frames."""


def run(ctx, timestamps: list, question: str) -> dict:
    frames = ctx.frames([float(t) for t in timestamps][:64])
    return {"text": ctx.ask(frames, prompt=str(question))}
