"""Generate a whole world: scripts, encoded videos, tasks with video-disjoint splits."""

from __future__ import annotations

import math
import os
import random
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from videvolve.datasets.synthworld.narration import Narration, espeak_available, narrate, speak
from videvolve.datasets.synthworld.questions import Draft, grounding, mcq
from videvolve.datasets.synthworld.render import encode_video
from videvolve.datasets.synthworld.script import VideoScript, make_script
from videvolve.datasets.synthworld.spoken import DEFAULT_MIX, spoken_drafts
from videvolve.datasets.transcripts import SUBTITLE_EXTENSIONS
from videvolve.errors import UsageError
from videvolve.tasks import LETTERS, Interval, Task, split_by_video, write_tasks

DEFAULT_FRACTIONS = {"train": 0.5, "selection": 0.25, "test": 0.25}
SOURCE = "synthworld"


@dataclass
class World:
    """A generated world: where it is, its scripts (the generator's truth) and its tasks."""

    root: Path
    scripts: list[VideoScript]
    tasks: list[Task]
    narrations: dict[str, Narration] = field(default_factory=dict)
    """Per video id, what the narrator says (empty for a silent world)."""

    @property
    def tasks_path(self) -> Path:
        """The world's tasks file."""
        return self.root / "tasks.jsonl"


def _questions_per_video(minutes: float) -> int:
    return max(4, round(minutes * 0.5))


def _letter_tasks(drafts: list[tuple[VideoScript, Draft]], rng: random.Random) -> list[Task]:
    """Turn drafts into tasks; correct mcq letters are dealt from shuffled blocks of A-D (balanced)."""
    n_mcq = sum(1 for _, d in drafts if d.kind == "mcq")
    letters = []
    for _ in range(math.ceil(n_mcq / 4)):
        block = list(LETTERS[:4])
        rng.shuffle(block)
        letters += block
    tasks = []
    counters: Counter[str] = Counter()
    for script, d in drafts:
        j = counters[script.video_id]
        counters[script.video_id] += 1
        common: dict[str, Any] = {
            "id": f"{script.video_id}-{j:03d}", "video_id": script.video_id,
            "video": f"videos/{script.video_id}.mp4", "question": d.question, "duration": script.duration,
            "evidence": [Interval(start=a, end=b) for a, b in d.evidence], "source": SOURCE,
            "meta": {"template": d.template, **d.meta},
        }
        if d.kind == "grounding":
            tasks.append(Task(kind="grounding", answer=[Interval(start=a, end=b) for a, b in d.answer], **common))
            continue
        letter = letters.pop()
        others = d.options[1:]
        rng.shuffle(others)
        k = LETTERS.index(letter)
        options = [*others[:k], d.options[0], *others[k:]]
        tasks.append(Task(kind="mcq", options=options, answer=letter, **common))
    return tasks


def _encode(args: tuple[VideoScript, str, Narration | None]) -> str:
    script, out, narration = args
    path = encode_video(script, out)
    if narration is not None:
        speak(narration, script.duration, path)
    return str(path)


def plan_world(videos: int, minutes: float, seed: int, fractions: dict[str, float] | None = None,
               questions: int | None = None, narration: bool = False,
               mix: dict[str, float] | None = None) -> tuple[list[VideoScript], list[Task]]:
    """The scripts and tasks of a world, without encoding anything (deterministic in the seed).

    With ``narration`` the videos speak (:func:`narrate`) and each video's questions are shared out by ``mix``
    (default :data:`DEFAULT_MIX`) between answers in the pictures, in the words, or needing both.
    """
    rng = random.Random(seed)
    scripts = []
    for i in range(videos):
        duration = minutes * 60 * rng.uniform(0.8, 1.2)
        scripts.append(make_script(f"video{i:03d}", duration, rng.getrandbits(32)))
    drafts: list[tuple[VideoScript, Draft]] = []
    for script in scripts:
        qrng = random.Random(rng.getrandbits(32))
        n = questions // 2 if questions else _questions_per_video(script.duration / 60)
        if narration:
            drafts += [(script, d) for d in spoken_drafts(script, narrate(script, seed), qrng, n, mix or DEFAULT_MIX)]
            continue
        drafts += [(script, d) for d in grounding(script, qrng, n)]
        drafts += [(script, d) for d in mcq(script, qrng, n)]
    tasks = split_by_video(_letter_tasks(drafts, rng), fractions or DEFAULT_FRACTIONS, seed=seed)
    return scripts, tasks


def generate_world(
    out_dir: str | Path,
    videos: int = 12,
    minutes: float = 20.0,
    seed: int = 0,
    fractions: dict[str, float] | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    questions: int | None = None,
    narration: bool = False,
    speech: bool = False,
    mix: dict[str, float] | None = None,
) -> World:
    """Write ``videos/*.mp4`` and ``tasks.jsonl`` under ``out_dir``; the same seed gives the same world.

    ``questions`` per video, half of each kind (default: one of each kind per two minutes, at least four).
    ``narration``: a narrator's captions beside each video (``videos/ID.vtt``) and questions by ``mix`` of the
    evidence they need; ``speech`` also speaks them into each video's sound track (needs espeak-ng; slow).
    Captions a world written into ``out_dir`` before left beside these videos' names are removed.
    """
    if speech and not espeak_available():
        raise UsageError("--speech needs espeak-ng to speak the narration: apt install espeak-ng (or use --narration "
                         "alone: the narrator's lines are still written as .vtt captions beside the videos)")
    root = Path(out_dir)
    (root / "videos").mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)  # the world's answers are private to its owner
    scripts, planned = plan_world(videos, minutes, seed, fractions, questions, narration or speech, mix)
    tasks = [t.model_copy(update={"video": str((root / t.video).resolve())}) for t in planned]
    narrations = {s.video_id: narrate(s, seed) for s in scripts} if narration or speech else {}
    for script in scripts:  # a world written here before left its captions: they would be read as this one's
        for ext in SUBTITLE_EXTENSIONS:
            (root / "videos" / f"{script.video_id}{ext}").unlink(missing_ok=True)
    for vid, n in narrations.items():
        (root / "videos" / f"{vid}.vtt").write_text(n.vtt(), encoding="utf-8")
    jobs = [(s, str(root / "videos" / f"{s.video_id}.mp4"), narrations.get(s.video_id) if speech else None)
            for s in scripts]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    done = 0
    if workers <= 1:
        for job in jobs:
            _encode(job)
            done += 1
            if progress:
                progress(done, len(jobs))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for _ in pool.map(_encode, jobs):
                done += 1
                if progress:
                    progress(done, len(jobs))
    write_tasks(tasks, root / "tasks.jsonl")
    return World(root=root, scripts=scripts, tasks=tasks, narrations=narrations)


def world_stats(tasks: Sequence[Task]) -> dict[str, Any]:
    """Shares a reader should check: short, multi-occurrence and absent grounding targets; mcq balance."""
    ground = [t for t in tasks if t.kind == "grounding"]
    positive = [t for t in ground if t.intervals]
    mcqs = [t for t in tasks if t.kind == "mcq"]

    def share(n: int, d: int) -> float:
        return round(n / d, 3) if d else 0.0

    return {
        "videos": len({t.video_id for t in tasks}),
        "hours": round(sum({t.video_id: t.duration or 0.0 for t in tasks}.values()) / 3600, 2),
        "grounding": len(ground),
        "absent_share": share(len(ground) - len(positive), len(ground)),
        "short_share": share(sum(1 for t in positive if max(i.length for i in t.intervals) <= 10), len(positive)),
        "multi_share": share(sum(1 for t in positive if len(t.intervals) > 1), len(positive)),
        "mcq": len(mcqs),
        "mcq_templates": dict(Counter(str(t.meta.get("template")) for t in mcqs)),
        "mcq_letters": dict(sorted(Counter(str(t.answer) for t in mcqs).items())),
        **({"evidence": dict(Counter(str(t.meta["evidence"]) for t in tasks))}
           if any("evidence" in t.meta for t in tasks) else {}),
        "splits": {s: {"videos": len({t.video_id for t in tasks if t.split == s}),
                       "tasks": sum(1 for t in tasks if t.split == s)}
                   for s in sorted({t.split or "-" for t in tasks})},
    }
