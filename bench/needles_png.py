"""Write docs/needles.png: three needle frames (a glyph, a word, a splice) of a real sample video.

Usage: python bench/needles_png.py TASKS_JSONL [OUT_PNG]  (TASKS_JSONL from `videvolve tasks generate`)
"""

from __future__ import annotations

import sys

from PIL import Image, ImageDraw

from videvolve.needles.frames import NeedleFrames, plan_of
from videvolve.tasks import read_tasks


def main(tasks_path: str, out: str = "docs/needles.png") -> None:
    """Pick the video whose plan has the most needle kinds and show one frame of each kind."""
    plans = {t.video_id: (t, plan_of(t)) for t in read_tasks(tasks_path) if plan_of(t) is not None}
    task, plan = max(plans.values(), key=lambda tp: len({n.kind for n in tp[1].needles}) if tp[1] else 0)
    assert plan is not None
    picks = []
    for kind in ("glyph", "text", "splice"):
        picks += [n for n in plan.needles if n.kind == kind][:1]
    frames = NeedleFrames(task.video, plan).frames([(n.start + n.end) / 2 for n in picks], 480)
    width = sum(f.image.width for f in frames) + 8 * (len(frames) + 1)
    sheet = Image.new("RGB", (width, max(f.image.height for f in frames) + 30), (255, 255, 255))
    draw, x = ImageDraw.Draw(sheet), 8
    for n, f in zip(picks, frames, strict=True):
        sheet.paste(f.image, (x, 24))
        draw.text((x, 6), f"{task.video_id}: {n.kind} '{n.name}' at {f.time:.2f} s", fill=(0, 0, 0))
        x += f.image.width + 8
    sheet.save(out)
    print(out, sheet.size)


if __name__ == "__main__":
    main(*sys.argv[1:])
