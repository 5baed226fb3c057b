"""probe_media: what the video is."""


def run(ctx) -> dict:
    info = ctx.probe()
    size = str(info["width"]) + "x" + str(info["height"])
    return {"text": "duration {:.2f} s, {:g} fps, {}".format(info["duration"], info["fps"], size)}
