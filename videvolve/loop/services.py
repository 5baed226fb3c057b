"""What the nodes share within one process: tasks, models, cache, memory, events, lineage, paths.

Built once by the driver (:func:`open_run`, from the run's :class:`Context`, so a resumed process rebuilds exactly
the same services from ``settings.json``), handed to every node as LangGraph's runtime context
(``runtime.context``), and closed by the driver. Nothing is cached between runs: a test builds its own services,
with fakes where it wants them (``open_run(ctx, vlm=..., memory=..., editor=...)``), and passes them in.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from videvolve.config import default_cache_path
from videvolve.editing.base import Editor
from videvolve.editing.command import CommandSpec, check_command
from videvolve.errors import UsageError
from videvolve.evaluation.evaluate import with_proxies
from videvolve.evaluation.results import Producer, TaskResult, load_result, read_result, video_fingerprint
from videvolve.evaluation.solve import solve_tasks
from videvolve.labelfree.labels import too_few_videos
from videvolve.loop.context import Context
from videvolve.memory.embedders import Embedder, HashingEmbedder, MiniLMEmbedder, default_embedder
from videvolve.memory.lineage import LineageRecord
from videvolve.memory.store import ChromaStore, DiagnosisStore
from videvolve.models import make_vlm
from videvolve.models.base import VLM, reach
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import CostModel, cost_model
from videvolve.rundir import RunDir
from videvolve.search.events import KnownEvent
from videvolve.search.services import RunServices
from videvolve.skill_library.harness import Harness, check_version, load_harness
from videvolve.tasks import Task, read_tasks


@dataclass
class Run:
    """Services of one run."""

    ctx: Context
    train: list[Task]
    selection: list[Task]
    excluded_videos: set[str]
    """Videos of this run's selection and test splits: memory queries for the editor leave them out."""
    excluded_fingerprints: set[str]
    """The content fingerprints of the videos of ``excluded_videos``: memory kept away from them by content too."""
    vlm: VLM
    probe_vlm: VLM
    cost: CostModel
    cache: ResponseCache | None
    memory: DiagnosisStore
    dir: RunDir
    """The run folder: every path of the run, its lineage and events."""
    editor: Editor | None = None
    """The editor to use instead of the one the settings ask for (tests inject fakes here)."""
    tasks_digest: str = ""
    """:func:`tasks_digest` of the train and selection tasks this run read (a resumed run must read the same)."""
    tasks: list[Task] = field(default_factory=list)
    """The train and selection tasks as the tasks file gives them (``train`` reads proxies under ``--proxy``): the
    files they read are what ``loop.inputs`` keeps and compares."""
    opened_at: float = field(default_factory=time.time)
    """When this process opened the run: ``--hours`` counts time from here and the running time of earlier ones."""
    sources: dict[str, str] = field(default_factory=dict)
    """A training video read from its proxy (``--proxy``) -> its source: a diagnosis records the source's content
    fingerprint, the one a later run holding the video out excludes (the proxy's own matches no source)."""

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def root(self) -> Path:
        """The run directory."""
        return self.dir.root

    def harness_dir(self, version: str) -> Path:
        """Where a harness version lives, refused when its files are not that version (:func:`check_version`)."""
        return check_version(self.dir.harness(version))

    def harness(self, version: str) -> Harness:
        """A harness version of this run."""
        return load_harness(self.harness_dir(version))

    def eval_dir(self, version: str, split: str) -> Path:
        """Results of one version on one split (``selection`` is read by the gate alone)."""
        return self.dir.evals(version, split).path

    def evaluate(self, version: str, tasks: list[Task], split: str) -> list[TaskResult]:
        """Results of a version on tasks (finished ones are reused from disk)."""
        return solve_tasks(self.harness(version), tasks, self.vlm, self.cost, self.ctx.runtime,
                           self.eval_dir(version, split), self.cache, executor=self.ctx.executor,
                           model=self.ctx.model, ray_address=self.ctx.ray_address)

    def stored(self, version: str, task: Task, split: str) -> TaskResult | None:
        """A stored result, without running anything.

        Keyed as :func:`~videvolve.evaluation.solve.producer_of` keys what it reuses: where a result is stored but
        not under the producer known so far, the endpoint is asked which checkpoint it serves first (a resumed
        process whose server is still loading does not know it yet), and the result is looked up again.
        """
        out = self.eval_dir(version, split)
        found = load_result(out, task, Producer.of(version, self.vlm, self.ctx.runtime, self.cost))
        if found is None and read_result(out, task.id) is not None:
            reach(self.vlm)
            found = load_result(out, task, Producer.of(version, self.vlm, self.ctx.runtime, self.cost))
        return found

    def batch(self, iteration: int) -> list[Task]:
        """The training batch of an iteration (deterministic in the seed and the iteration)."""
        rng = random.Random(f"{self.ctx.seed}:{iteration}")
        return rng.sample(self.train, min(self.ctx.batch, len(self.train)))

    def close(self) -> None:
        """Release the cache and the memory's index."""
        if self.cache is not None:
            self.cache.close()
        self.memory.close()

    def event(self, event: KnownEvent) -> None:
        """One line in the run's events (``search.events``: its kinds, and their reader)."""
        self.dir.append_event(event.record())

    def lineage(self) -> dict[str, LineageRecord]:
        """Every version's merged lineage entry (the search's protocol)."""
        return self.dir.lineage()

    def record_lineage(self, version: str, **data: Any) -> None:
        """Add or update one version's lineage entry (idempotent)."""
        self.dir.record_lineage(version, **data)


def _embedder(name: str) -> Embedder:
    if name == "hashing":
        return HashingEmbedder()
    if name == "minilm":
        return MiniLMEmbedder()
    return default_embedder()


def open_run(ctx: Context, *, vlm: VLM | None = None, probe_vlm: VLM | None = None,
             memory: DiagnosisStore | None = None, editor: Editor | None = None) -> Run:
    """Build a run's services from its settings (the test split is never loaded); close them with ``close()``.

    ``vlm``, ``probe_vlm``, ``memory`` and ``editor`` replace the solver's model, the investigator's probe model, the
    memory of diagnoses and the editor the settings ask for (a test's fakes: ``testing.ScriptedReplies``,
    ``memory.InMemoryStore``, ``testing.ScriptedEditor``); a model given as ``vlm`` is also the probes' unless
    ``--investigator-model`` or ``probe_vlm`` names another, as the settings' own. ``close()`` closes the memory
    given too. An editor or investigator the settings would run on SimVLM, which it cannot work with, is refused
    (:meth:`Context.needs_a_real_model`; an editor given is not the settings' own).
    """
    tasks = read_tasks(ctx.tasks)
    train = [t.with_duration() for t in tasks if t.split == "train"]
    selection = [t.with_duration() for t in tasks if t.split == "selection"]
    if not train or not selection:
        few = too_few_videos(tasks)
        raise UsageError(f"{ctx.tasks} needs train and selection splits (`videvolve tasks split`); found "
                         f"{len(train)} train and {len(selection)} selection tasks" + (f": {few}" if few else ""))
    excluded = {t.video_id for t in tasks if t.split not in ("train",)}
    fingerprints = {fp for fp in map(video_fingerprint, {t.video for t in tasks if t.split != "train"}) if fp}
    videos = [t.video for t in tasks]
    given = train + selection
    digest = tasks_digest(given)
    read, selection = with_proxies(train, ctx.proxy), with_proxies(selection, ctx.proxy)
    sources = {p.video: t.video for t, p in zip(train, read, strict=True) if p.video != t.video}
    train = read
    del tasks  # the test split is never used by evolve
    if (why := ctx.needs_a_real_model(editor_given=editor is not None)) is not None:  # the CLI asked it first
        raise UsageError(why)
    if ctx.editor.kind == "command" and ctx.executor == "ray":
        raise UsageError("--editor command shares the network with the agent, and a Ray cluster runs code for "
                         "anyone who reaches it (Ray has no authentication): the agent could leave its sandbox "
                         "through it; use --executor local with --editor command")
    if ctx.editor.kind == "command":
        check_command(command_spec(ctx, videos))
    vlm = make_vlm(ctx.model) if vlm is None else vlm
    probe = probe_vlm if probe_vlm is not None else make_vlm(ctx.investigator.model) if ctx.investigator.model else vlm
    if memory is None:  # held until close(): FolderBusy if another run has it
        memory = ChromaStore(ctx.memory, _embedder(ctx.embedder))
    try:
        cache = None if ctx.no_cache else ResponseCache(ctx.cache or default_cache_path())
    except BaseException:
        memory.close()
        raise
    return Run(ctx=ctx, train=train, selection=selection, excluded_videos=excluded,
               excluded_fingerprints=fingerprints, vlm=vlm, probe_vlm=probe,
               cost=cost_model(ctx.model.family, ctx.model.max_pixels), cache=cache, memory=memory,
               dir=RunDir(ctx.root),
               tasks_digest=digest, tasks=given, sources=sources, editor=editor)


def tasks_digest(tasks: list[Task]) -> str:
    """What a run's decisions rest on, as one hash: every train and selection task's content, in file order."""
    text = json.dumps([t.model_dump(mode="json") for t in tasks], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def command_spec(ctx: Context, videos: list[str]) -> CommandSpec:
    """How ``--editor command`` runs, with every path of the run it must never see."""
    protected = [ctx.root, Path(ctx.tasks), Path(ctx.tasks).parent, Path(ctx.memory),
                 Path(ctx.cache) if ctx.cache else default_cache_path(), *{Path(v).parent for v in videos}]
    return CommandSpec(cmd=ctx.editor.cmd or "", repair_cmd=ctx.editor.cmd_repair, timeout_s=ctx.editor.cmd_timeout,
                       ro_binds=ctx.editor.cmd_ro_binds, env=ctx.editor.cmd_env, protected=[str(p) for p in protected])


def _satisfies(run: Run) -> RunServices:  # mypy checks here that a Run is what the search needs
    return run
