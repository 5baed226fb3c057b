"""The offline demo: synthesize a small world, print its statistics, and let SimVLM look at a contact sheet."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from videvolve.cli.data_cmds import stats_table
from videvolve.datasets.synthworld import generate_world, world_stats
from videvolve.datasets.synthworld.palette import readable_side
from videvolve.media import contact_sheet, frames_at, probe
from videvolve.models.sim import perceive

console = Console()


def run_demo(out: Path, videos: int = 8, minutes: float = 6.0, seed: int = 0) -> int:
    """Run the demo into ``out``; returns an exit code."""
    console.rule("1. SynthWorld")
    world = generate_world(out / "world", videos=videos, minutes=minutes, seed=seed)
    console.print(stats_table(world_stats(world.tasks)))
    console.print(f"tasks: {world.tasks_path}")

    console.rule("2. A contact sheet of one video")
    video = world.root / "videos" / f"{world.scripts[0].video_id}.mp4"
    info = probe(video)
    n = 24
    times = [info.duration * (i + 0.5) / n for i in range(n)]
    sheet = contact_sheet(frames_at(video, times), cols=6, cell_width=160)
    sheet_path = out / "contact_sheet.png"
    sheet.image.save(sheet_path)
    console.print(f"{video.name}: {info.duration:.0f} s, {info.width}x{info.height}, {info.fps:g} fps, "
                  f"GOP {info.keyframe_interval:g} s -> {sheet_path} ({sheet.cols}x{sheet.rows} cells, "
                  f"{sheet.cell_width}x{sheet.cell_height} px)")

    console.rule("3. What SimVLM perceives in each cell")
    console.print(f"glyphs smaller than {readable_side()} px in the picture are reported 'unclear'")
    table = Table()
    for col in ("cell", "time", "SimVLM sees", "glyph px", "generator's truth"):
        table.add_column(col)
    script = world.scripts[0]
    for i, t in enumerate(sheet.times[:12]):
        p = perceive(sheet.cell(i))
        event = script.event_at(t)
        truth = f"{event.name}, {event.size * sheet.cell_width / info.width:.0f} px" if event else "no glyph"
        table.add_row(str(i), f"{t:.1f} s", p.describe(), f"{p.side:.0f}" if p.side else "-", truth)
    console.print(table)
    return 0
