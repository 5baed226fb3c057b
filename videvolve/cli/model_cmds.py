"""Commands that run harnesses or serve models: ``eval``, ``ask``, ``serve-sim``, ``doctor``."""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from videvolve.cli.common import (
    add_model_args,
    model_settings,
    open_cache,
    output_folder,
    runtime_settings,
    stdout_console,
)
from videvolve.errors import ErrorKind, HostError, InfraError, UsageError
from videvolve.interrupt import INTERRUPTED
from videvolve.models.base import SIM_ONLY_NOTICE

if TYPE_CHECKING:
    from videvolve.tasks import Task

SDK_VIDEO = "the task's video"
"""How a media error names the video to harness code (which never sees its path)."""

out = stdout_console()
err = Console(stderr=True, soft_wrap=True)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the commands."""
    e = sub.add_parser("eval", help="run a harness on a split of a tasks file and score it")
    e.add_argument("--tasks", type=Path, required=True, help="the tasks file (JSONL)")
    e.add_argument("--split", default="test", help="split to run (or 'all')")
    e.add_argument("--harness", default="uniform", help="seed name or harness directory")
    e.add_argument("--limit", type=int, default=None, help="only the first N tasks of the split")
    e.add_argument("--out", type=Path, default=None, help="output folder (default evals/<harness>-<split>); "
                   "rerunning into it skips finished tasks")
    e.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    e.add_argument("--executor", choices=["local", "ray"], default="local", help="where evaluations run")
    e.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: a local one)")
    add_model_args(e)
    e.set_defaults(func=cmd_eval)

    a = sub.add_parser("ask", help="ask a harness one question about one video")
    a.add_argument("video", type=Path)
    a.add_argument("question")
    a.add_argument("--option", action="append", default=[], help="an option (repeat): 'A) red' or 'red'")
    a.add_argument("--grounding", action="store_true", help="a 'when does X happen?' query (default without options)")
    a.add_argument("--harness", default="scan_refine", help="a harness folder, or the name of a seed harness")
    a.add_argument("--trace", type=Path, default=None, help="write the trace (JSON lines) here")
    a.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_model_args(a)
    a.set_defaults(func=cmd_ask)

    s = sub.add_parser("serve-sim", help="SimVLM behind an OpenAI-compatible HTTP API")
    s.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    s.add_argument("--port", type=int, default=8000, help="port to listen on")
    s.add_argument("--latency-ms", type=float, default=0.0, help="added latency per request (to mimic a GPU server)")
    s.add_argument("--model", default="simvlm", help="the model name it serves (what clients pass as model)")
    s.add_argument("--api-key", default=None, help="require this bearer token")
    s.add_argument("--max-images", type=int, default=512, help="images per request before a 400, like vLLM's limit")
    s.add_argument("--canned", default=None, metavar="TEXT", help="answer every request with TEXT and do no work "
                   "(to measure the client alone, as bench/solve.py does)")
    m = s.add_argument_group("--mimic vllm: behave as vLLM 0.34 does (flags named as vLLM's)")
    m.add_argument("--mimic", choices=["vllm"], default=None, help="reproduce vLLM's limits, errors, token counts, "
                   "video sampling and tool-call parsing")
    m.add_argument("--family", default="qwen2.5-vl", choices=["qwen2.5-vl", "qwen3-vl"],
                   help="whose processor rules count tokens and sample video (without --mimic too: what SimVLM "
                   "sees pictures through)")
    m.add_argument("--max-model-len", type=int, default=131072, help="context length (400 beyond it)")
    m.add_argument("--limit-mm-per-prompt", type=json.loads, default=None,
                   help='items per request, e.g. \'{"image": 64, "video": 1}\' (400 beyond it)')
    m.add_argument("--enable-auto-tool-choice", action="store_true", help="return parsed tool calls")
    m.add_argument("--tool-call-parser", default=None, help="hermes (the only one mimicked)")
    m.add_argument("--media-io-kwargs", type=json.loads, default=None, help='e.g. \'{"video": {"num_frames": 16}}\'')
    m.add_argument("--mm-processor-kwargs", type=json.loads, default=None,
                   help='e.g. \'{"max_pixels": 1003520}\': a larger image (qwen2.5-vl: video frame) is resized '
                   '(without --mimic too: SimVLM sees it resized)')
    m.add_argument("--enable-prompt-tokens-details", action="store_true", help="as vLLM's flag")
    m.add_argument("--trust-request-mm-kwargs", action="store_true", help="accept a request's mm_processor_kwargs "
                   "and media_io_kwargs (without it they are a 400, as in vLLM; a clip sent as a video carries both)")
    m.add_argument("--fail-first", type=int, default=0, help="fault: answer 503 to the first N chat requests")
    m.add_argument("--retry-after", type=float, default=None, help="fault: send Retry-After with each 503")
    s.set_defaults(func=cmd_serve_sim)

    v = sub.add_parser("serve-vllm", help="start vLLM (installed separately) with the flags harnesses need")
    v.add_argument("model", help="a Hugging Face model id or a local path, e.g. Qwen/Qwen2.5-VL-7B-Instruct")
    v.add_argument("--vllm-bin", default=None, help="the vllm executable of its own environment (default: on PATH)")
    v.add_argument("--host", default="127.0.0.1", help="bind address: 127.0.0.1 serves this machine only; 0.0.0.0 "
                   "lets an eval host elsewhere reach it (anyone on the network can then use the GPU: set --api-key "
                   "and a firewall)")
    v.add_argument("--port", type=int, default=8000, help="port to listen on")
    v.add_argument("--api-key", default=None, help="require this bearer token (clients read it from OPENAI_API_KEY)")
    v.add_argument("--served-model-name", default=None, help="the name clients pass as --model (default: MODEL)")
    v.add_argument("--max-model-len", type=int, default=None, help="context length")
    v.add_argument("--images", type=int, default=256, help="images one request may carry")
    v.add_argument("--tool-call-parser", default="hermes", help="vLLM's tool-call parser")
    v.add_argument("--allowed-local-media-path", default=None, help="let requests name local files under this folder")
    v.add_argument("--ready-timeout", type=float, default=1800.0, help="seconds to wait for the model to load")
    v.set_defaults(func=cmd_serve_vllm)

    d = sub.add_parser("doctor", help="check decoding, the sandbox and a model endpoint; say what to fix")
    d.add_argument("--calibrate", action="store_true", help="send images of known sizes (and, with --video, clips of "
                   "4-33 frames cut from it) and print the visual-token formula's error against the server's "
                   "usage.prompt_tokens")
    d.add_argument("--video", type=Path, default=None, help="a video of yours: the largest request each seed makes "
                   "on it, against the served context")
    d.add_argument("--context", type=int, default=None, help="the context to check against when the server does not "
                   "report one (default 32768)")
    add_model_args(d, cache=False)
    d.add_argument("--json", action="store_true", help="print the checks as a JSON list")
    d.set_defaults(func=cmd_doctor)


def summary_table(title: str, summary: dict[str, Any]) -> Table:
    """The per-kind results of one evaluation (errors score 0 and their frames count)."""
    table = Table(title=title)
    for col in ("metric", "n", "value", "frames/q", "tokens/q", "errors"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for kind, metric, key in (("mcq", "mcq accuracy", "accuracy"), ("grounding", "grounding mIoU", "miou")):
        if kind in summary:
            part = summary[kind]
            table.add_row(metric, str(part["n"]), f"{part[key]:.3f}", f"{part['frames_per_question']:.1f}",
                          f"{part['image_tokens_per_question']:.0f}", str(part["errors"]))
    if "grounding" in summary:
        table.add_row("grounding R@0.5", "", f"{summary['grounding']['R@0.5']:.3f}", "", "", "")
    errors = ", ".join(f"{k} {v}" for k, v in summary["errors_by_kind"].items()) or "0"
    table.add_row("all: mean score", str(summary["n"]), f"{summary['score']:.3f}",
                  f"{summary['frames_per_question']:.1f}", f"{summary['image_tokens_per_question']:.0f}", errors)
    if summary.get("transcript_tokens_per_question") or summary.get("ocr_calls_per_question"):
        table.add_row("read: transcript tokens / OCR calls per q", "",
                      f"{summary.get('transcript_tokens_per_question', 0):.0f} / "
                      f"{summary.get('ocr_calls_per_question', 0):.1f}", "", "", "")
    return table


def cmd_eval(args: argparse.Namespace) -> int:
    """``videvolve eval``."""
    from videvolve.api import resolve_harness
    from videvolve.evaluation.evaluate import evaluate, select, with_proxies
    from videvolve.models import make_vlm
    from videvolve.models.cache import CacheUse
    from videvolve.models.cost import cost_model
    from videvolve.rundir import EvalDir
    from videvolve.tasks import read_tasks

    ms, rs = model_settings(args), runtime_settings(args)
    tasks = select(read_tasks(args.tasks), args.split, args.limit, str(args.tasks))
    tasks = with_proxies(tasks, args.proxy, lambda v: err.print(f"making a proxy of {v} (once)", highlight=False))
    src = resolve_harness(args.harness, rs.budget)
    name = Path(args.harness).name
    outdir = output_folder(args.out or EvalDir.default(name, args.split).path, "the evaluation's folder")
    scores: list[float] = []
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        bar = progress.add_task(f"{name} on {args.split}", total=len(tasks), info="")

        def on_result(r: Any) -> None:
            scores.append(r.score)
            progress.update(bar, advance=1, info=f"score {sum(scores) / len(scores):.3f}")

        try:
            done = evaluate(src, tasks, outdir, make_vlm(ms), cost_model(ms.family, ms.max_pixels), rs,
                            open_cache(args), ms,
                            args.executor, args.ray_address, on_result,
                            meta={"harness": name, "split": args.split, "backend": ms.backend, "model": ms.model})
        except (InfraError, HostError) as exc:
            progress.stop()
            err.print(f"[bold red]run stopped:[/] {exc}\n{len(scores)} task result(s) are kept in {outdir}; "
                      "rerun the same command to continue.", highlight=False)
            return 3
        except KeyboardInterrupt:
            progress.stop()
            err.print(f"[yellow]interrupted:[/] {len(scores)} task result(s) are kept in {outdir}; rerun the same "
                      "command to continue.", highlight=False)
            return INTERRUPTED
    summary = done.summary
    if args.json:
        print(json.dumps(summary, default=float))
    else:
        out.print(summary_table(f"{name} ({done.harness.version_id}) on {args.split} of {args.tasks.name}", summary))
        out.print(CacheUse.model_validate(summary["cache_use"]).line(), highlight=False)
        out.print(f"results, traces and predictions: {outdir}")
    from videvolve.labelfree.labels import label_mix, labels_line
    labels = labels_line(label_mix(tasks, (args.split,)))
    if labels:  # the score is agreement with generated or teacher labels, and says so
        err.print(f"note: the labels are not all gold: {labels}", highlight=False)
    failed = {r.task_id for r in done.results if r.error_kind == ErrorKind.MEDIA}
    if failed:
        videos = sorted({why_unread(t) for t in tasks if t.id in failed})
        shown = "; ".join(videos[:3])
        more = f"; and {len(videos) - 3} more" if len(videos) > 3 else ""
        err.print(f"[bold yellow]warning:[/] {len(failed)} task(s) could not read their video, scored 0: "
                  f"{shown}{more} (each reason in {outdir}/results/). Put the files back (or fix the tasks' 'video' "
                  "fields) and rerun the same command: only these run again.", highlight=False)
    unsupported = summary["errors_by_kind"].get(ErrorKind.UNSUPPORTED, 0)
    if unsupported:
        err.print(f"[bold yellow]notice:[/] {SIM_ONLY_NOTICE} ({unsupported} of {summary['n']} task(s) had no "
                  "answer for this reason)", highlight=False)
    return 0


def why_unread(task: Task) -> str:
    """The file a task with a ``media`` error could not read, and why: its video, or a video its needles splice in."""
    from videvolve.errors import SpliceSourceError
    from videvolve.needles.frames import check_splices, plan_of

    if not Path(task.video).exists():
        return f"{task.video} (not found)"
    plan = plan_of(task)
    try:
        if plan is not None:
            check_splices(plan)
    except SpliceSourceError as exc:
        return f"{exc.path} ({'changed' if exc.changed else 'not found'}; spliced into {task.video})"
    return f"{task.video} (unreadable)"


def cmd_ask(args: argparse.Namespace) -> int:
    """``videvolve ask``: the answer, its evidence and its cost; one clear line on failure."""
    from videvolve.api import load_harness
    from videvolve.models import make_vlm
    from videvolve.models.cache import CacheUse

    ms = model_settings(args)
    loaded = load_harness(args.harness, runtime_settings(args).budget)
    answer = loaded.ask(args.video, args.question, options=args.option or None, grounding=args.grounding,
                        model=ms, runtime=runtime_settings(args), vlm=make_vlm(ms), cache=open_cache(args),
                        trace=args.trace)
    usage = {k: v for k, v in answer.usage.items() if k != "observed_times"}
    cache_use = CacheUse.of([usage], enabled=not args.no_cache)
    if args.json:
        print(json.dumps({"outcome": answer.outcome, "answer": answer.answer, "error_kind": answer.error_kind,
                          "error": answer.error, "evidence_times": answer.evidence_times,
                          "observed_times": answer.observed_times, "usage": usage,
                          "cache_use": cache_use.model_dump()}))
    elif answer.outcome == "ok":
        shown = answer.answer if isinstance(answer.answer, str) else (
            ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in answer.answer) or "never (no interval)")
        out.print(f"[bold]answer:[/] {shown}")
        if answer.observed_times:
            ts = answer.observed_times
            out.print(f"looked at {len(ts)} moment(s) between {min(ts):.1f} s and {max(ts):.1f} s")
        out.print(f"cost: {usage.get('frames', 0)} frames, {usage.get('image_tokens', 0)} image tokens, "
                  f"{usage.get('cumulative_tokens', 0)} prompt tokens over {usage.get('requests', 0)} request(s)")
        out.print(cache_use.line(), highlight=False)
    if answer.error_kind == ErrorKind.UNSUPPORTED:
        err.print(f"[bold yellow]notice:[/] {SIM_ONLY_NOTICE}", highlight=False)
        return 1
    if answer.error_kind == ErrorKind.MEDIA:  # the video given, not the harness: named, and exit 2 as for input
        said = (answer.error or "").splitlines()[0].removeprefix("SDKError: ") if answer.error else ""
        err.print(f"[bold red]error:[/] {said.replace(SDK_VIDEO, str(args.video))}", highlight=False)
        return 2
    if answer.outcome != "ok":
        err.print(f"[bold red]error:[/] the harness failed ({answer.error_kind}): "
                  f"{(answer.error or '').splitlines()[0] if answer.error else ''}", highlight=False)
        return 1
    return 0


def cmd_serve_sim(args: argparse.Namespace) -> int:
    """``videvolve serve-sim``."""
    from videvolve.models.sim.mimic import MimicSettings
    from videvolve.models.sim.server import serve

    kwargs = args.mm_processor_kwargs or {}
    cap = kwargs.get("max_pixels") if isinstance(kwargs, dict) else None
    if not isinstance(kwargs, dict) or not (cap is None or (type(cap) is int and cap > 0)):
        raise UsageError(f"--mm-processor-kwargs {json.dumps(args.mm_processor_kwargs)}: give a JSON object whose "
                         "max_pixels, if any, is a positive integer, e.g. '{\"max_pixels\": 1003520}'")
    mimic = None
    if args.mimic:
        mimic = MimicSettings(family=args.family, max_model_len=args.max_model_len,
                              limit_mm_per_prompt=args.limit_mm_per_prompt or {"image": args.max_images, "video": 999},
                              enable_auto_tool_choice=args.enable_auto_tool_choice,
                              tool_call_parser=args.tool_call_parser, media_io_kwargs=args.media_io_kwargs or {},
                              mm_processor_kwargs=args.mm_processor_kwargs or {},
                              enable_prompt_tokens_details=args.enable_prompt_tokens_details,
                              trust_request_mm_kwargs=args.trust_request_mm_kwargs,
                              fail_first=args.fail_first, slow_ms=args.latency_ms, retry_after=args.retry_after)
    backend = None
    if args.canned is not None:
        from videvolve.models.sim.canned import CannedVLM

        backend = CannedVLM(args.canned)
    how = f"vLLM-like ({args.family}, context {args.max_model_len})" if mimic else \
        f"a canned reply {args.canned!r}" if backend else f"SimVLM ({args.family})"
    err.print(f"serving {how} as model {args.model!r} at http://{args.host}:{args.port}/v1 (Ctrl-C stops)")
    serve(host=args.host, port=args.port, model=args.model, latency_ms=args.latency_ms, api_key=args.api_key,
          max_images=args.max_images, mimic=mimic, backend=backend, family=args.family,
          max_pixels=cap)
    return 0


def cmd_serve_vllm(args: argparse.Namespace) -> int:
    """Start vLLM, wait until it serves, print the --base-url, stop it cleanly on Ctrl-C or SIGTERM."""
    import signal
    import time

    from videvolve.models.vllm_server import VLLMServer, find_vllm, vllm_command

    extra = list(getattr(args, "passthrough", []))  # everything after `--`
    command = vllm_command(args.model, find_vllm(args.vllm_bin), args.host, args.port, args.max_model_len,
                           args.images, args.tool_call_parser, args.allowed_local_media_path, extra, args.api_key,
                           args.served_model_name)
    from videvolve.config import cache_home

    log = cache_home() / f"vllm-{args.port}.log"
    server = VLLMServer(command, args.host, args.port, log, args.api_key)
    shown = " ".join("***" if i > 0 and command[i - 1] == "--api-key" else c for i, c in enumerate(command))
    err.print(f"starting: {shown}\nlog: {log}", highlight=False)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"note: bound to {args.host}: reachable from other machines"
                  + ("" if args.api_key else "; without --api-key anyone who can reach it can use it"))
    server.start()
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    try:
        name = args.served_model_name or args.model
        server.wait_ready(args.ready_timeout, name)
        cap = served_max_pixels(extra)
        out.print(f"ready: --backend openai --base-url {server.base_url} --model {name}"
                  + (f" --max-pixels {cap}" if cap else ""), highlight=False)
        while not stop["now"] and server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
        if server.proc is not None and server.proc.poll() is not None:
            err.print(f"vLLM exited with code {server.proc.returncode}:\n{server.log_tail()}", highlight=False)
            return 3
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    err.print("vLLM stopped")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """``videvolve doctor``."""
    from videvolve.doctor import run_checks

    settings = model_settings(args, ask_endpoint=False)  # doctor says which model it would use, and why
    checks = run_checks(settings, calibration=args.calibrate, video=args.video, context=args.context)
    if args.json:
        print(json.dumps([{"check": c.name, "status": c.status, "detail": c.detail} for c in checks]))
        return 1 if any(c.status == "fail" for c in checks) else 0
    table = Table(title="videvolve doctor")
    for col in ("check", "status", "detail"):
        table.add_column(col)
    colours = {"ok": "green", "warn": "yellow", "fail": "red", "skip": "dim"}
    for c in checks:
        table.add_row(c.name, f"[{colours[c.status]}]{c.status}[/]", c.detail)
    out.print(table)
    return 1 if any(c.status == "fail" for c in checks) else 0


def served_max_pixels(extra: list[str]) -> int | None:
    """The ``max_pixels`` of a ``--mm-processor-kwargs`` JSON among vLLM's extra arguments (None: none given)."""
    for flag, value in itertools.pairwise(extra):
        if flag == "--mm-processor-kwargs":
            try:
                cap = json.loads(value).get("max_pixels")
            except (ValueError, AttributeError):
                return None
            return int(cap) if isinstance(cap, int | float) else None
    return None
