"""An lmms-eval model whose ``generate_until`` runs a harness on each document's video.

``lmms-eval --model videvolve --model_args harness=scan_refine,base_url=http://127.0.0.1:8000/v1,model=Qwen/...``
(registered through the ``lmms_eval.models`` entry point, see :mod:`videvolve.serving.lmms_eval_entry`). Each
request's context is split into the question and its "A) ..." option lines (options: mcq; none: grounding, as
``videvolve ask`` decides); the first video of ``doc_to_visual(doc)`` is the video. The reply is the answer text;
``costs=PATH`` appends each answer with its evidence times and cost to a JSON-lines file.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from videvolve.api import load_harness
from videvolve.config import ModelSettings, RuntimeSettings, default_cache_path
from videvolve.errors import ErrorKind, MediaError, UsageError
from videvolve.models.cache import ResponseCache
from videvolve.models.openai_backend import with_served_model
from videvolve.serving.agent import AgentAnswer, Cost, VideoAgent, question_kind, split_question

try:
    from lmms_eval.api.model import lmms
except ImportError:  # lmms-eval is not installed: the module still imports (checks, docs); lmms-eval is what runs it
    lmms = object

log = logging.getLogger(__name__)


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


LMMS_EVAL_OWN = frozenset({"batch_size", "max_batch_size", "device"})
"""What lmms-eval adds to the model arguments itself (``create_from_arg_string``'s extra config): not ours."""
ALIASES = {"timeout": "timeout_s"}
"""Model-argument names kept from before they were the settings' own."""


def agent_from_args(harness: str = "scan_refine", cache: str | None = None, no_cache: Any = False,
                    **settings: Any) -> VideoAgent:
    """The agent the model arguments describe: the sim backend unless a ``base_url`` is given.

    Besides ``harness``, ``cache`` and ``no_cache``, any field of :class:`~videvolve.config.ModelSettings` or
    :class:`~videvolve.config.RuntimeSettings` by its name (``max_pixels=1003520``, ``jpeg_quality=90``,
    ``budget=64``); a name that is neither is refused, not ignored.
    """
    given = {ALIASES.get(k, k): v for k, v in settings.items() if v is not None and v != ""}
    unknown = sorted(set(given) - set(ModelSettings.model_fields) - set(RuntimeSettings.model_fields))
    if unknown:
        known = ", ".join(["harness", "cache", "no_cache", "grounding", "costs", *ModelSettings.model_fields,
                           *RuntimeSettings.model_fields])
        raise UsageError(f"model_args: unknown {', '.join(unknown)} (videvolve takes {known})")
    chosen = given.get("backend") or ("openai" if given.get("base_url") else "sim")
    try:
        model = ModelSettings.model_validate({**{k: v for k, v in given.items() if k in ModelSettings.model_fields},
                                              "backend": chosen})
        runtime = RuntimeSettings.model_validate({"image_format": "png" if chosen == "sim" else "jpeg",
                                                  **{k: v for k, v in given.items()
                                                     if k in RuntimeSettings.model_fields}})
    except ValidationError as exc:
        said = "; ".join(f"{e['loc'][0] if e['loc'] else ''}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"model_args: {said}") from None
    model = with_served_model(model, how="model=NAME in --model_args")  # none named: the one the endpoint serves
    store = None if _flag(no_cache) else ResponseCache(Path(cache) if cache else default_cache_path())
    return VideoAgent(load_harness(harness, runtime.budget), model, runtime, cache=store)


def video_of(visuals: Any) -> str:
    """The first video path among a document's visuals."""
    items = visuals if isinstance(visuals, list | tuple) else [visuals]
    for item in items:
        if isinstance(item, str | Path):
            return str(item)
    raise UsageError(f"the document has no video path among its visuals ({type(items[0]).__name__ if items else 'none'}"
                     "): videvolve's harness decodes the video itself, so doc_to_visual must return its path")


class VidevolveLMM(lmms):
    """``--model videvolve``: a harness answering each document's question about its video."""

    is_simple = True

    def __init__(self, harness: str = "scan_refine", cache: str | None = None, no_cache: Any = False,
                 grounding: Any = False, costs: str | None = None, **model_args: Any) -> None:
        """The model arguments (``--model_args``, as :func:`agent_from_args` takes them).

        What lmms-eval adds itself (batch_size, device) is not ours.
        """
        super().__init__()
        self.agent = agent_from_args(harness, cache, no_cache,
                                     **{k: v for k, v in model_args.items() if k not in LMMS_EVAL_OWN})
        self.concurrency = self.agent.runtime.concurrency
        self.grounding = _flag(grounding)
        self.costs = Path(costs) if costs else None

    def answer(self, context: str, video: str, cancel: threading.Event | None = None) -> AgentAnswer:
        """One document: the harness's answer to the context's question about the video.

        A video that is missing or cannot be decoded is an error answer (no text, scored 0), as ``eval`` scores it:
        lmms-eval asks for every document in one call, and one bad video must not end the run.
        """
        question, options = split_question(context)
        try:
            return self.agent.ask(video, question, options or None, grounding=self.grounding, cancel=cancel)
        except MediaError as exc:
            log.warning("videvolve: %s (answered with nothing, scored 0)", exc)
            return AgentAnswer(harness=self.agent.version, kind=question_kind(options, self.grounding),
                               outcome="error", text="", cost=Cost(), error_kind=ErrorKind.MEDIA.value,
                               error=str(exc))

    def generate_until(self, requests: list[Any]) -> list[str]:
        """The answer text of each request (an mcq letter, or grounding intervals as JSON), in their order.

        ``concurrency`` documents (the runtime's, 4 by default, as ``eval``) are answered at once; a failure that
        ends the run (the model endpoint down, Ctrl-C) stops the harnesses under way.
        """
        jobs = []
        for request in requests:
            # generate_until: (context, gen_kwargs, doc_to_visual, doc_id, task, split); multi-round requests have
            # doc_to_text after doc_to_visual
            context, _gen_kwargs, doc_to_visual, *_, doc_id, task, split = request.args
            jobs.append((context, video_of(doc_to_visual(self.task_dict[task][split][doc_id])), doc_id, task))
        stop, written = threading.Event(), threading.Lock()

        def one(context: str, video: str, doc_id: Any, task: str) -> str:
            answer = self.answer(context, video, stop)
            if self.costs is not None:
                line = json.dumps({"task": task, "doc_id": doc_id, "video": video, **answer.model_dump(mode="json")})
                with written, self.costs.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            return answer.text

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(one, *job) for job in jobs]
            try:
                return [f.result() for f in futures]
            except BaseException:
                stop.set()  # the harnesses under way stop within a second; the rest never start
                for f in futures:
                    f.cancel()
                raise

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        """Not offered: a harness answers, it does not score continuations."""
        raise NotImplementedError("videvolve answers with generate_until tasks only (output_type: generate_until)")

    def generate_until_multi_round(self, requests: list[Any]) -> list[str]:
        """One round per document (the first), as ``generate_until``."""
        return self.generate_until(requests)
