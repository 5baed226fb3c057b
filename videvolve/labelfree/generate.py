"""``tasks generate``: a video-disjoint task set from a folder of videos alone, one job per video.

Each video is one job (scan, needle plan, questions; the perceived pass when asked), run on a thread pool or on Ray,
its tasks kept in ``<out>.parts/<video>.json`` as soon as it is done so a rerun picks up where it stopped. A video
that cannot be read is reported by name and the others are still processed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from videvolve.atomic import write_text_atomic
from videvolve.errors import MediaError, UsageError, VidevolveError
from videvolve.labelfree.folder import alone_note, early_splits, repeat_note, same_content, splice_pools
from videvolve.labelfree.perceived import LOOK_VERSION, model_identity, stored_timeline, unread_note
from videvolve.labelfree.video_tasks import (
    DEFAULT_FRACTIONS,
    SOURCES,
    GenerateSettings,
    Perceiver,
    VideoJob,
    letter_tasks,
    video_tasks,
)
from videvolve.media.check import list_videos
from videvolve.media.info import file_key, probe
from videvolve.models.base import reach
from videvolve.needles.frames import PLAN_KEY
from videvolve.needles.needles import NeedlePlan
from videvolve.tasks import Task
from videvolve.threads import run_in_threads

__all__ = ["DEFAULT_FRACTIONS", "SOURCES", "GenerateReport", "GenerateSettings", "Perceiver", "VideoOutcome",
           "generate", "letter_tasks", "video_tasks"]


@dataclass
class VideoOutcome:
    """One video's tasks, or why it has none."""

    video_id: str
    path: str
    tasks: list[Task] = field(default_factory=list)
    error: str | None = None
    cached: bool = False
    notes: list[str] = field(default_factory=list)
    """What the video's tasks lack, and why (the perceived pass could not read the model's replies)."""


@dataclass
class GenerateReport:
    """All outcomes, and the tasks with their splits."""

    outcomes: list[VideoOutcome]
    tasks: list[Task]

    @property
    def errors(self) -> list[VideoOutcome]:
        """Videos that got no tasks (they could not be read, or no question fits in them), each with why."""
        return [o for o in self.outcomes if o.error]


def check_fractions(fractions: dict[str, float]) -> dict[str, float]:
    """Generated labels train and select; a test split must be gold, from elsewhere."""
    if fractions.get("test"):
        raise UsageError("generated tasks never make a test split: measure on gold questions from elsewhere; "
                         "use e.g. --fractions train=0.7,selection=0.3")
    return fractions


def check_sources(sources: Sequence[str]) -> None:
    """Only sources that make labels from the videos alone; teacher labels answer a person's questions elsewhere."""
    if "teacher" in sources:
        raise UsageError("--sources teacher is not a generated source: a teacher answers your own questions, so use "
                         "`videvolve tasks from-csv QUESTIONS.csv --videos DIR --out tasks.jsonl --teacher "
                         "scan_refine` (rows without an answer), then `videvolve tasks split`")
    unknown = set(sources) - set(SOURCES)
    if unknown or not sources:
        raise UsageError(f"unknown --sources {', '.join(sorted(unknown)) or '(none)'}: use a comma-separated list "
                         f"of {', '.join(SOURCES)}")


MAX_ID_BYTES = 120
"""The longest video id kept as its file's stem: ids name the stored parts' files (255 bytes at most)."""


def unusable_name(path: Path) -> str | None:
    """Why a video's path cannot be written into a tasks file (UTF-8 text), or None."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return ("its path is not valid UTF-8, and a tasks file (UTF-8 text) cannot name it: rename it (or its "
                "folder) and run again")
    return None


def shown(path: Path | str) -> str:
    r"""A path as it can be printed (bytes that are not UTF-8 as ``\xff``)."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def video_ids(paths: Sequence[Path], known: dict[str, str] | None = None) -> dict[str, Path]:
    """A unique id per video: its file stem, with a short hash of its path when two stems collide.

    A stem longer than :data:`MAX_ID_BYTES`, or not UTF-8, is shortened to a printable start and the hash. ``known``
    (a path's id in an earlier run into the same ``--out``, :func:`known_ids`) wins: a file added later with a stem
    already taken never renames a video whose tasks, results and splits were made under its old id.
    """
    known = known or {}
    kept = {str(p): known[str(p)] for p in paths if str(p) in known}
    taken = set(kept.values())
    stems: dict[str, int] = {}
    for p in paths:
        stems[p.stem] = stems.get(p.stem, 0) + 1

    def of(p: Path) -> str:
        if str(p) in kept:
            return kept[str(p)]
        digest = hashlib.sha1(os.fsencode(p)).hexdigest()
        stem = shown(p.stem)
        if stem != p.stem or len(stem.encode()) > MAX_ID_BYTES:
            return f"{stem.encode()[:MAX_ID_BYTES - 9].decode(errors='ignore')}-{digest[:8]}"
        return p.stem if stems[p.stem] == 1 and p.stem not in taken else f"{p.stem}-{digest[:6]}"
    return {of(p): p for p in paths}


def known_ids(parts: Path) -> dict[str, str]:
    """Each video's id as the stored parts name it (path -> id): what an earlier run into this ``--out`` called it.

    A part names its video (one with no task too); a part written before it did, by its first task's. Of two parts
    naming one video (one an older version renamed), the newest names it: the ids of the tasks file last written.
    """
    out: dict[str, str] = {}
    for _, part in sorted(((-_mtime(p), p.name), p) for p in (parts.glob("*.json") if parts.is_dir() else ())):
        if part.name.endswith(".timeline.json"):
            continue
        try:
            data = json.loads(part.read_text(encoding="utf-8"))
            tasks = data.get("tasks") or []
            video = data.get("video") or (tasks[0]["video"] if tasks and isinstance(tasks[0], dict) else None)
        except (OSError, ValueError, AttributeError, KeyError, TypeError, RecursionError):
            continue  # not a part this tool wrote: nothing known from it
        if isinstance(video, str) and part.stem not in out.values():
            out.setdefault(video, part.stem)
    return out


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _part_path(parts: Path, video_id: str) -> Path:
    return parts / f"{video_id}.json"


PLANNER_VERSION = 4
"""Bumped when the same video and settings would give other tasks (2: needles as long as the perceived events; 3:
needles as clear of other glyphs as the footage's own, perceived successor questions; 4: words measured to fit the
frame, no question about a glyph a splice shows, splices from the video's own split keeping their source's
fingerprint), so that a video's stored tasks from an older planner are made again rather than reused."""


def _stamp(path: Path, settings: GenerateSettings, model: dict[str, Any] | None = None) -> str:
    """Stored tasks are reused only for the same file (path too: tasks name it), settings, planner and perceiver."""
    payload = [file_key(path), settings.model_dump(mode="json"), PLANNER_VERSION]
    if model is not None and "perceived" in settings.sources:
        payload += [model, LOOK_VERSION]
    return hashlib.sha1(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _load_part(parts: Path, video_id: str, stamp: str, videos: Sequence[str]) -> list[Task] | None:
    """The video's stored tasks, unless made otherwise or splicing in a video not among ``videos``.

    ``videos``: those it may splice in; one spliced in but no longer among them is gone, or now in another split.
    """
    p = _part_path(parts, video_id)
    try:  # a part that is not one this tool wrote (edited, damaged) is made again
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("stamp") != stamp:
            return None
        tasks = [Task.model_validate(t) for t in data["tasks"]]
        plans = [NeedlePlan.model_validate(t.meta[PLAN_KEY]) for t in tasks if PLAN_KEY in t.meta]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):  # ValidationError is a ValueError
        return None
    if any(n.source is not None and n.source not in videos for plan in plans for n in plan.needles):
        return None
    if data.get("sources", {}) != _splice_sources(plans):  # a source replaced since: its offsets may not fit
        return None
    return tasks


def _splice_sources(plans: Sequence[NeedlePlan]) -> dict[str, list[int] | None]:
    """Each spliced video's version (size, mtime), None when it cannot be found: a part is kept for these."""
    out: dict[str, list[int] | None] = {}
    for n in (n for plan in plans for n in plan.needles if n.source):
        try:
            out[str(n.source)] = list(file_key(str(n.source))[1:])
        except MediaError:
            out[str(n.source)] = None
    return out


def perceiving_model(perceiver: Perceiver | None, videos: dict[str, Path], settings: GenerateSettings,
                     parts: Path, pools: dict[str, list[str]] | None = None) -> dict[str, Any] | None:
    """The perceiver's :func:`~videvolve.labelfree.perceived.model_identity`, part of what a video's stamp names.

    As :func:`~videvolve.evaluation.solve.producer_of` keys results: when a video's stored part is not this model's,
    its endpoint is asked first which checkpoint it serves (a server still loading has not said yet, and a part
    stamped before it did would be taken for any checkpoint served under the name); all stored: no endpoint needed.
    """
    if perceiver is None:
        return None
    model = model_identity(perceiver.vlm, perceiver.cost, perceiver.image_format, perceiver.jpeg_quality)
    if "perceived" in settings.sources:
        pools = pools if pools is not None else _every_other(videos)
        for vid, path in videos.items():
            try:
                stamp = _stamp(path, settings, model)
            except (OSError, MediaError):
                continue  # no tasks for it, whatever the model
            if _load_part(parts, vid, stamp, pools[vid]) is None:
                reach(perceiver.vlm)
                return model_identity(perceiver.vlm, perceiver.cost, perceiver.image_format, perceiver.jpeg_quality)
    return model


def _save_part(parts: Path, video_id: str, stamp: str, tasks: list[Task], video: str) -> None:
    plans = [NeedlePlan.model_validate(t.meta[PLAN_KEY]) for t in tasks if PLAN_KEY in t.meta]
    write_text_atomic(_part_path(parts, video_id),
                      json.dumps({"stamp": stamp, "video": video, "tasks": [t.model_dump(mode="json") for t in tasks],
                                  "sources": _splice_sources(plans)}),
                      "a video's generated tasks")


def _every_other(videos: dict[str, Path]) -> dict[str, list[str]]:
    """Every other video each video may splice in (a caller that made no split before the tasks)."""
    paths = {vid: str(p.resolve()) for vid, p in videos.items() if unusable_name(p) is None}
    return {vid: [p for v, p in paths.items() if v != vid] for vid in videos}


def _ray_job(job: VideoJob, path: str, video_id: str, others: list[str]) -> str:
    return json.dumps([t.model_dump(mode="json") for t in job(Path(path), video_id, others)])


def run_jobs(videos: dict[str, Path], job: VideoJob, settings: GenerateSettings, parts: Path, workers: int,
             executor: str = "local", on_done: Callable[[VideoOutcome], None] | None = None,
             model: dict[str, Any] | None = None, pools: dict[str, list[str]] | None = None) -> list[VideoOutcome]:
    """Run ``job`` on every video not done before; media errors become that video's error, nothing else stops.

    ``model``: the perceiving model's :func:`~videvolve.labelfree.perceived.model_identity` (part of what was done).
    ``pools``: the videos each video may splice in (:func:`~videvolve.labelfree.folder.splice_pools`: those of its
    own split); None: every other video.
    """
    parts.mkdir(parents=True, exist_ok=True, mode=0o700)
    outcomes: dict[str, VideoOutcome] = {}
    pending: list[tuple[str, Path, str]] = []
    pools = pools if pools is not None else _every_other(videos)
    for vid, path in videos.items():
        if (bad := unusable_name(path)) is not None:
            outcomes[vid] = VideoOutcome(vid, shown(path), error=bad)
            continue
        try:
            stamp = _stamp(path, settings, model)
        except (OSError, MediaError) as exc:
            outcomes[vid] = VideoOutcome(vid, str(path), error=f"{path}: {exc}")
            continue
        stored = _load_part(parts, vid, stamp, pools[vid])
        if stored is not None:
            outcomes[vid] = VideoOutcome(vid, str(path), stored, cached=True)
        else:
            pending.append((vid, path, stamp))
    for o in outcomes.values():
        if on_done:
            on_done(o)

    def finish(vid: str, path: Path, stamp: str, tasks: list[Task] | None, error: str | None) -> None:
        if tasks is not None:
            _save_part(parts, vid, stamp, tasks, str(path))
        outcome = VideoOutcome(vid, str(path), tasks or [], error)
        outcomes[vid] = outcome
        if on_done:
            on_done(outcome)

    if executor == "ray":
        from videvolve.evaluation.executors import InFlight, ensure_ray

        ray = ensure_ray()
        remote = ray.remote(num_cpus=1)(_ray_job)
        flight = InFlight(ray, lambda item: remote.remote(job, str(item[1]), item[0], pools[item[0]]), pending,
                          workers)
        try:
            for item, ref in flight:  # each video kept as soon as it is done, whichever finishes first
                try:
                    finish(*item, [Task.model_validate(t) for t in json.loads(ray.get(ref))], None)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, MediaError):
                        finish(*item, None, str(cause))
                    elif isinstance(cause, VidevolveError):  # an endpoint down, a full disk: said as itself
                        raise cause from None
                    else:
                        raise
        except BaseException:  # Ctrl-C or a failure: the videos still running stop (those done are kept)
            flight.cancel(force=True)
            raise
    else:
        def one(item: tuple[str, Path, str]) -> tuple[list[Task] | None, str | None]:
            vid, path, _ = item
            try:
                return job(path, vid, pools[vid]), None
            except MediaError as exc:
                return None, str(exc)

        run_in_threads(pending, one, workers, lambda item, made: finish(*item, *made))
    return [outcomes[v] for v in videos if v in outcomes]


def generate(videos_dir: Path, settings: GenerateSettings, parts: Path, perceiver: Perceiver | None = None,
             workers: int | None = None, executor: str = "local",
             on_done: Callable[[VideoOutcome], None] | None = None) -> GenerateReport:
    """Tasks for every readable video under ``videos_dir``, with video-disjoint train/selection splits.

    A copy of another video of the folder (the same content under another name) is skipped, its outcome saying so
    (:mod:`videvolve.labelfree.folder`). The split is made first, and a video's splice comes from its own split.
    """
    check_fractions(settings.fractions)
    files = list_videos(videos_dir)
    if not files:
        raise UsageError(f"no videos found in {videos_dir}")
    known = known_ids(parts)
    named = video_ids([f.resolve() for f in files], known)
    check_sources(settings.sources)
    repeats = same_content(named, set(known))
    videos = {vid: path for vid, path in named.items() if vid not in repeats}
    splits = early_splits({v: p for v, p in videos.items() if unusable_name(p) is None}, settings.fractions,
                          settings.seed)
    pools = splice_pools(videos, splits)

    def job(path: Path, vid: str, others: list[str]) -> list[Task]:
        return video_tasks(path, vid, others, settings, perceiver)
    workers = workers or (len(videos) if executor == "ray" else min(len(videos), max(1, os.cpu_count() or 1)))
    model = perceiving_model(perceiver, videos, settings, parts, pools)
    copies = [VideoOutcome(vid, shown(path), error=repeat_note(shown(repeats[vid]))) for vid, path in named.items()
              if vid in repeats]
    for o in copies:
        if on_done:
            on_done(o)
    outcomes = run_jobs(videos, job, settings, parts, workers, executor, on_done, model, pools)
    for o in outcomes:
        timeline = stored_timeline(parts, o.video_id) if "perceived" in settings.sources and not o.error else None
        note = unread_note(timeline) if timeline is not None else None
        if not o.tasks and not o.error:
            o.error = note or why_no_tasks(Path(o.path), settings)
        elif note and not o.error:
            o.notes.append(note)
        if o.tasks and not o.error and o.video_id in splits and not pools.get(o.video_id):
            o.notes.append(alone_note(splits[o.video_id]))
    first = next(iter(settings.fractions))  # a video that got tasks though it did not open before: spliced nothing
    tasks = [t.model_copy(update={"split": splits.get(t.video_id, first)}) for o in outcomes for t in o.tasks]
    rank = {vid: k for k, vid in enumerate(named)}
    return GenerateReport(sorted(outcomes + copies, key=lambda o: rank[o.video_id]), tasks)


def why_no_tasks(path: Path, settings: GenerateSettings) -> str:
    """Why a video that could be read got no question, in words."""
    reasons = []
    if "needles" in settings.sources:
        try:
            length = f"it is {probe(path).duration:.2f} s long: "
        except MediaError:
            length = ""
        reasons.append(f"no needle fits ({length}too short, or its own glyphs leave no room; a needle needs about "
                       "2 to 3.5 s with none of them on screen)")
    if "perceived" in settings.sources:
        reasons.append("the perceived pass saw nothing to ask about (only what it names in SynthWorld's words "
                       "becomes a question)")
    return "no question could be made about it: " + "; ".join(reasons)


def describe_sources(tasks: Sequence[Task]) -> str:
    """'needles 40, perceived 12' -- which labels a set of tasks rests on."""
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.label_source] = counts.get(t.label_source, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
