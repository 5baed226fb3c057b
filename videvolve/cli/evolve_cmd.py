"""``videvolve evolve``: the overnight loop, resumable, with a live view and one line per iteration."""

from __future__ import annotations

import argparse
import json
import logging
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from videvolve.cli.common import add_model_args
from videvolve.cli.flags import add_sections, build, given, merged
from videvolve.cli.resume_flags import EXTENDABLE, helper_models, refuse_changes, resumed_endpoints
from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import InputNotFoundError, UsageError
from videvolve.rundir import RunDir
from videvolve.search.history import GateEntry, entries
from videvolve.usage import Spend

if TYPE_CHECKING:
    from videvolve.labelfree.labels import LabelMix
    from videvolve.tasks import Task

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
NEXT = {"prepare": "solving a training batch", "solve": "investigating failures", "investigate": "editing",
        "edit": "validating the candidate", "validate": "gating on the selection set", "gate": "recording",
        "record": "solving the next batch"}
"""What the run does after each node (the status line); a node of ``graph/builder.py:NODES`` needs its entry."""


# the run's own place and the models are set from other flags; everything else is a Context field's own flag
NOT_FLAGS = ("run_dir", "run_id")

if TYPE_CHECKING:
    from videvolve.loop.context import Context


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``evolve``: one flag per setting of :class:`~videvolve.loop.context.Context`."""
    from videvolve.loop.context import Context

    p = sub.add_parser("evolve", help="improve a harness on training tasks, gated on a video-disjoint selection set")
    p.add_argument("--run", type=Path, required=True, help="run directory (its name is the run id)")
    groups = add_sections(p, Context, "run settings", skip=NOT_FLAGS)
    editor, investigator = groups["editor"], groups["investigator"]
    editor.add_argument("--editor-model", default=None, help="model name of the editor (default: the solver's; on "
                        "an --editor-base-url of its own, the one model served there unless --model was given)")
    editor.add_argument("--editor-base-url", default=None, help="endpoint of the editor model")
    investigator.add_argument("--investigator-model", default=None, help="model name of the investigator's probes "
                              "(default: the solver's)")
    investigator.add_argument("--investigator-agent-model", default=None, help="model name of the agent "
                              "investigator (default: as --editor-model's)")
    investigator.add_argument("--investigator-agent-base-url", default=None, help="endpoint of the agent investigator")
    p.add_argument("--config", type=Path, default=None, help="TOML or JSON of settings (a run's settings.json works)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and its estimated cost, spend nothing")
    p.add_argument("--resume", action="store_true", help="continue the run in --run where it stopped")
    p.add_argument("--log-level", default="WARNING", help="logging level: warning (default), info or debug")
    add_model_args(p, cache=False)
    p.set_defaults(func=cmd_evolve)


def _load_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    if not path.is_file():
        raise InputNotFoundError(f"config file not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a settings object (keys and values, flat or by section)")
    return data


def build_context(args: argparse.Namespace) -> Context:
    """Settings from --config (or the run's settings.json on --resume), then the flags given explicitly."""
    from videvolve.loop.context import Context, nest

    run = args.run.resolve()
    settings = RunDir(run).settings
    flags = given(args, Context)
    if args.resume:
        if not settings.exists():
            raise UsageError(f"nothing to resume in {run} (no {settings.name}); drop --resume to start it")
        data = nest(RunDir(run).read_settings())  # a run from before the grouping stored flat keys
        data["run_dir"] = str(run)  # where the folder is now (moved, or a copy): never the path it was started in
        refuse_changes(run, data, _resolved(flags), resumed_endpoints(args, data))
        _name_unnamed_model(data, settings)
        return build(Context, merged(data, {k: v for k, v in flags.items() if k == EXTENDABLE}), str(settings))
    if settings.exists():
        raise UsageError(f"{run} already holds a run; pass --resume to continue it, or choose another --run")
    data = _resolved(merged(nest(_load_config(args.config)), flags))
    data.update({"run_dir": str(run), "run_id": run.name})
    if "tasks" not in data:
        raise UsageError("--tasks is required (or a --config that names them)")
    from videvolve.models.openai_backend import with_served_model

    where = str(args.config) if args.config else "the command line"
    model = {**data.get("model", {}), **given(args, ModelSettings)}  # the flags over the config's
    named = build(ModelSettings, model, where)
    solver = with_served_model(named)
    data["model"] = {**model, **solver.model_dump(exclude_unset=True)}
    data["runtime"] = {**data.get("runtime", {}), **given(args, RuntimeSettings)}
    data["runtime"].setdefault("image_format", "png" if solver.backend == "sim" else "jpeg")
    unnamed = solver is not named or (solver.backend == "sim" and "model" not in named.model_fields_set)
    for (section, key), value in helper_models(args, solver, ask=unnamed).items():
        data.setdefault(section, {})[key] = value
    return build(Context, data, where)


def _name_unnamed_model(data: dict[str, Any], settings: Path) -> None:
    """A run stored with an empty model name goes on under the one model its endpoint serves.

    videvolve before 2026-12-06 sent "" where no model was named; replies asked under "" are not taken for it.
    """
    from videvolve.models.openai_backend import with_served_model

    stored = data.get("model") or {}
    if stored.get("backend") != "openai" or str(stored.get("model") or "").strip():
        return
    unnamed = {k: v for k, v in stored.items() if k != "model"}
    found = with_served_model(build(ModelSettings, unnamed, str(settings)), how="a server that serves one model")
    data["model"] = {**stored, "model": found.model}
    err.print(f"note: {settings} has no model name (an older videvolve sent an empty one); this run goes on under "
              f"{found.model!r}, the one model {found.base_url} serves, and asks again what was asked under the "
              "empty name", highlight=False)


def _resolved(data: dict[str, Any]) -> dict[str, Any]:
    """Settings with their paths made absolute, and a run directory given as the seed replaced by its harness."""
    from videvolve.api import resolve_harness

    out = dict(data)
    if out.get("tasks"):
        out["tasks"] = str(Path(out["tasks"]).resolve())
    if "seed_harness" in out:  # a run directory given as the seed: its best harness (or its mixture's tier)
        out["seed_harness"] = str(resolve_harness(out["seed_harness"]))
    for key in ("memory", "cache"):
        if out.get(key):
            out[key] = str(Path(out[key]).expanduser().resolve())
    return out


def _dry_run(ctx: Context) -> int:
    from videvolve.api import resolve_harness
    from videvolve.errors import MediaError
    from videvolve.graph.plan import estimate, most_frames
    from videvolve.labelfree.labels import label_mix, labels_line
    from videvolve.media import probe
    from videvolve.skill_library.harness import load_harness
    from videvolve.tasks import read_tasks, selection_size

    tasks = read_tasks(ctx.tasks)
    harness = load_harness(resolve_harness(ctx.seed_harness))
    try:
        info = probe(tasks[0].video) if tasks else None
        size = (info.width, info.height) if info else None
    except MediaError:
        size = None
    plan = estimate(ctx, tasks, harness, size, most_frames(tasks))
    table = Table(title=f"plan of {ctx.run_id} (dry run: nothing is spent; worst case, nothing reused)")
    table.add_column("what")
    table.add_column("estimate", justify="right")
    rows = [*plan.rows,
            ("question runs (harness on one task)", f"{plan.questions:,}"),
            ("model calls", f"{plan.model_calls:,}"),
            ("frames shown", f"{plan.frames:,}"),
            (f"visual tokens ({ctx.model.family} cost model, largest frame an edit may show)",
             f"{plan.visual_tokens:,}"),
            (f"time at --concurrency {ctx.runtime.concurrency} (rough)", _duration(plan.seconds))]
    for what, v in rows:
        table.add_row(what, v)
    out.print(table)
    gate_power(ctx, *selection_size(tasks), out)
    labels = labels_line(label_mix(tasks))
    if labels:
        out.print(f"not all labels are gold: {labels}", highlight=False)
    _teacher_note(tasks, ctx, out)
    for note in plan.notes:
        out.print(f"note: {note}", highlight=False)
    out.print(f"seed {harness.name}; editor {ctx.editor.kind}; investigator {ctx.investigator.kind}; model "
              f"{ctx.model.model} ({ctx.model.backend}); search {ctx.search}; validation {ctx.gate.validation}; "
              f"executor {ctx.executor}; "
              f"memory {ctx.memory}")
    return 0


def _duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.4 hours``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} hours"


def cmd_evolve(args: argparse.Namespace) -> int:
    """Run (or resume) the loop."""
    from videvolve.errors import HostError, InfraError
    from videvolve.graph.builder import GOES_ON
    from videvolve.graph.driver import evolve

    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING))
    ctx = build_context(args)
    if (refused := ctx.needs_a_real_model()) is not None:  # before the plan, as before any spending
        raise UsageError(refused + (f" (in a new --run: {ctx.root} keeps the editor and investigator it started "
                                    "with)" if args.resume else ""))
    if args.dry_run:
        return _dry_run(ctx)
    from videvolve.folderlock import ensure_free
    from videvolve.labelfree.labels import label_mix, labels_line
    from videvolve.tasks import read_tasks, selection_size

    ensure_free(ctx.root, "run folder")  # a second copy of a running run: refused before anything is printed
    tasks = read_tasks(ctx.tasks)
    gate_power(ctx, *selection_size(tasks), err)
    started = time.time()
    mixes = label_mix(tasks)
    labels = labels_line(mixes)
    if labels:  # not all gold: say which labels the editor learns from and the gate decides on
        out.print(f"not all labels are gold: {labels}", highlight=False)
    _teacher_note(tasks, ctx, err)
    selection = next((m for m in mixes if m.split == "selection"), None) if labels else None
    try:
        with out.status("starting", spinner="dots") as status:

            done_at: list[float] = []

            def on_update(node: str, values: dict[str, Any], state: dict[str, Any]) -> None:
                if node == GOES_ON:
                    _iteration_line(state, selection)
                    done_at.append(time.time())
                it = int(state.get("iteration", 0))
                eta = ""
                if len(done_at) >= 1 and it < ctx.stop.iterations:
                    per = (done_at[-1] - started) / len(done_at)
                    eta = f", ETA {per * (ctx.stop.iterations - it) / 60:.0f} min"
                shown = min(it + 1, ctx.stop.iterations)  # the iteration under way, counted from 1
                status.update(f"iteration {shown}/{ctx.stop.iterations}: {NEXT.get(node, node)}; incumbent "
                              f"{state.get('incumbent')} score {state.get('incumbent_score', 0):.3f} cost "
                              f"{state.get('incumbent_cost', 0):,.0f}; {_ledger(state.get('spent') or {})}; "
                              f"{time.time() - started:.0f} s{eta}")

            final = evolve(ctx, on_update)
    except (InfraError, HostError) as exc:
        err.print(f"[bold red]run stopped:[/] {exc}\nEverything finished is kept; continue with "
                  f"`videvolve evolve --run {ctx.root} --resume`.", highlight=False)
        return 3
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted.[/] Everything finished is kept; continue with\n"
                  f"  videvolve evolve --run {ctx.root} --resume", highlight=False)
        return 130
    except Exception:  # a bug: reported as one by the console, after what the user can still do
        err.print(f"[bold red]the run stopped on an error of videvolve's[/] (below). Every step finished before it is "
                  f"kept: once it is fixed, `videvolve evolve --run {ctx.root} --resume` retries the step.",
                  highlight=False)
        raise
    out.print(f"stopped after {final.get('iteration')} iteration(s): {final.get('stop_reason') or 'already done'}")
    n = ((final.get("tree") or {}).get(final.get("incumbent")) or {}).get("n")  # multi-fidelity: its rung's questions
    out.print(f"best harness: {final.get('incumbent')} (selection score {final.get('incumbent_score', 0):.3f}"
              f"{f' on {n} questions' if n else ''}, {final.get('incumbent_cost', 0):,.1f} "
              f"{ctx.gate.cost_measure.label} per question) -> {RunDir(ctx.root).best}")
    out.print(f"spent: {_ledger(final.get('spent') or {})}", highlight=False)
    failing = _errors_note(ctx, final.get("incumbent"))
    if failing:
        err.print(f"[yellow]warning:[/] {failing}", highlight=False)
    return _silent_editor(ctx, entries(final.get("history") or []))


def _errors_note(ctx: Context, version: str | None) -> str | None:
    """When most of the best harness's selection answers are errors: how many, and the commonest message.

    A run whose model cannot see the videos (SimVLM on real footage, a server that drops images) still completes;
    its scores of 0 would otherwise read as a harness that answers badly.
    """
    from collections import Counter

    from videvolve.evaluation.results import TaskResult

    folder = RunDir(ctx.root).evals(str(version), "selection").results
    results = []
    for path in sorted(folder.glob("*.json")) if version else []:
        try:  # a note at the end of a run: a result it cannot read (edited, torn by hand) is left out
            results.append(TaskResult.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    errors = [r for r in results if r.outcome == "error"]
    if not results or 2 * len(errors) < len(results):
        return None
    message, n = Counter(((r.error or "").splitlines() or [""])[0][:300] for r in errors).most_common(1)[0]
    return (f"{len(errors)} of {len(results)} selection answers of the best harness are errors (scored 0); "
            f"the commonest, {n} time(s): {message}")


def _teacher_note(tasks: list[Task], ctx: Context, console: Console) -> None:
    """On teacher labels: what the teacher paid per question, and whether a gain may spend towards it."""
    from videvolve.labelfree.teacher import teacher_cost

    metric = ctx.gate.cost_metric
    spent = teacher_cost([t for t in tasks if t.split in ("train", "selection")], metric)
    if spent is None:
        return
    unit = "frames" if metric == "frames" else "visual tokens"
    if ctx.gate.cost_ceiling is None:
        console.print(f"teacher labels: the teacher spent {spent:,.0f} {unit} per question; without "
                      f"--cost-ceiling a gain may cost at most (1+{ctx.gate.alpha}) x the seed's, so a harness "
                      f"costing well below the teacher but above that cannot be found (--cost-ceiling "
                      f"{spent / 2:.0f}: half the teacher's)", highlight=False)
    else:
        console.print(f"teacher labels: the teacher spent {spent:,.0f} {unit} per question; a gain may "
                      f"cost up to {ctx.gate.cost_ceiling:,.0f} ({ctx.gate.cost_ceiling / spent:.2f}x the teacher's)",
                      highlight=False)


def gate_power(ctx: Context, n_selection: int, videos: int, console: Console) -> None:
    """The gate's rule and what its selection set can detect (a warning when it is coarser than +0.05)."""
    gate = ctx.gate
    for line in gate.acceptance.announce(gate, n_selection, videos):
        console.print(f"gate: {line.text}" + (f"[yellow]warning:[/] {line.warning}" if line.warning else ""),
                      highlight=False)


def _ledger(spent: dict[str, float]) -> str:
    """Model calls paid for, with the editor's and the agent investigator's own shares, and tokens sent."""
    return Spend.from_state(spent).line()


SILENT_EDITOR = 4
"""Exit code of a run whose model-driven editor never produced a usable revision."""


def _silent_editor(ctx: Context, history: list[GateEntry]) -> int:
    """Warn when no iteration proposed anything; a model-driven editor that never did is an error (exit 4)."""
    if not history or any(e.candidate for e in history):
        return 0
    reasons = sorted({e.reason for e in history})
    err.print(f"[bold yellow]warning:[/] no iteration of this run proposed a revision: {'; '.join(reasons)[:800]}",
              highlight=False)
    if ctx.editor.kind == "heuristic":
        return 0
    folder = RunDir(ctx.root)
    where = (f"the command's output in {folder.workspaces}/*/command.log and the reasons in "
             f"{folder.events} (event 'no proposal')" if ctx.editor.kind == "command" else
             f"the editor model's replies in {folder.events} (event 'no proposal') and its endpoint "
             "with `videvolve doctor`")
    err.print(f"[bold red]error:[/] the {ctx.editor.kind} editor never produced a usable revision; check {where}.",
              highlight=False)
    return SILENT_EDITOR


def _iteration_line(state: dict[str, Any], selection: LabelMix | None = None) -> None:
    """The gate's lines of the iteration just recorded; with ``selection``, which labels the gate decided on."""
    it = int(state.get("iteration", 1)) - 1
    for e in entries(h for h in state.get("history") or [] if h.get("iteration") == it):
        out.print(e.line() + (f" (gate on {selection.text()})" if selection else ""), highlight=False)
