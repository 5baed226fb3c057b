"""extract_frames_at: frames at timestamps."""


def run(ctx, timestamps: list, max_side: int = 0) -> dict:
    frames = ctx.frames([float(t) for t in timestamps][:64], max_side=int(max_side) or None)
    return {"text": f"{len(frames)} frame(s) follow", "observations": frames}
