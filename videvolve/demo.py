"""The offline demo: synthesize a small world, look at it with SimVLM, evaluate two seed harnesses on its test split.

Everything runs on the CPU with no network: SynthWorld videos, SimVLM as the model, harnesses in the sandbox.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from videvolve.cli.data_cmds import stats_table
from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world, world_stats
from videvolve.datasets.synthworld.palette import readable_side
from videvolve.media import contact_sheet, frames_at, probe
from videvolve.metrics import paired_bootstrap
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM, perceive
from videvolve.skill_library.harness import copy_harness, load_harness, seed_path
from videvolve.solve import TaskResult, solve_tasks, summarize

console = Console()


def _look(world, out: Path) -> None:
    video = world.root / "videos" / f"{world.scripts[0].video_id}.mp4"
    info = probe(video)
    n = 24
    times = [info.duration * (i + 0.5) / n for i in range(n)]
    sheet = contact_sheet(frames_at(video, times), cols=6, cell_width=160)
    sheet_path = out / "contact_sheet.png"
    sheet.image.save(sheet_path)
    console.print(f"{video.name}: {info.duration:.0f} s, {info.width}x{info.height}, {info.fps:g} fps -> "
                  f"{sheet_path} ({sheet.cols}x{sheet.rows} cells of {sheet.cell_width}x{sheet.cell_height} px)")
    console.print(f"SimVLM reads one cell at a time; glyphs under {readable_side()} px are 'unclear':")
    table = Table()
    for col in ("cell", "time", "SimVLM sees", "generator's truth"):
        table.add_column(col)
    script = world.scripts[0]
    for i, t in enumerate(sheet.times[:8]):
        event = script.event_at(t)
        truth = f"{event.name}, {event.size * sheet.cell_width / info.width:.0f} px" if event else "no glyph"
        table.add_row(str(i), f"{t:.1f} s", perceive(sheet.cell(i)).describe(), truth)
    console.print(table)


def run_demo(out: Path, videos: int = 8, minutes: float = 10.0, seed: int = 0) -> int:
    """Run the demo into ``out``; returns an exit code."""
    console.rule("1. SynthWorld: long videos of short events, questions of both kinds")
    world = generate_world(out / "world", videos=videos, minutes=minutes, seed=seed)
    console.print(stats_table(world_stats(world.tasks)))

    console.rule("2. What the model sees")
    _look(world, out)

    console.rule("3. Two seed harnesses on the held-out test split (SimVLM, sandboxed)")
    tasks = [t for t in world.tasks if t.split == "test"]
    results: dict[str, list[TaskResult]] = {}
    table = Table(title=f"{len(tasks)} test questions over {len({t.video_id for t in tasks})} videos")
    for col in ("harness", "mcq accuracy", "grounding mIoU", "R@0.5", "frames/q", "image tokens/q", "errors"):
        table.add_column(col, justify="left" if col == "harness" else "right")
    for name in ("uniform", "scan_refine"):
        harness = load_harness(copy_harness(seed_path(name), out / "harnesses"))
        with Progress(TextColumn(f"[bold]{name}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as progress:
            bar = progress.add_task(name, total=len(tasks))

            def advance(_: TaskResult, bar: TaskID = bar, progress: Progress = progress) -> None:
                progress.advance(bar)

            results[name] = solve_tasks(harness, tasks, SimVLM(), cost_model("qwen2.5-vl"),
                                        RuntimeSettings(concurrency=2), out / "evals" / name, on_result=advance)
        s = summarize(tasks, results[name])
        g = s.get("grounding", {})
        table.add_row(name, f"{s.get('mcq', {}).get('accuracy', 0):.3f}", f"{g.get('miou', 0):.3f}",
                      f"{g.get('R@0.5', 0):.3f}", f"{s['frames_per_question']:.1f}",
                      f"{s['image_tokens_per_question']:.0f}", str(s["errors"]))
    console.print(table)
    diff = paired_bootstrap([r.score for r in results["uniform"]], [r.score for r in results["scan_refine"]])
    console.print(f"scan_refine - uniform, mean per-question score: {diff.diff:+.3f} (95% CI {diff.ci_low:+.3f} to "
                  f"{diff.ci_high:+.3f}, paired bootstrap p = {diff.p_value:.3f})")
    console.print(f"results and traces: {out / 'evals'}; run `videvolve eval --help` to evaluate your own tasks")
    return 0
