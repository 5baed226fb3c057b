"""``videvolve doctor``: check decoding, the sandbox and the model endpoint, and say what to fix."""

from __future__ import annotations

import base64
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from videvolve.config import ModelSettings
from videvolve.errors import InfraError, ModelRequestError, VidevolveError
from videvolve.models.deadline import total_timeout_client
from videvolve.models.http_errors import SERVER_CLIP_FLAGS, TOOL_FLAGS, refuses_request_mm_kwargs, server_misconfigured


@dataclass
class Check:
    """One line of the report."""

    name: str
    status: str
    """ok, warn, fail or skip."""
    detail: str


def _decoding() -> Check:
    from videvolve.media import frames_at
    from videvolve.testing import make_index_video, read_index

    with tempfile.TemporaryDirectory() as d:
        path = make_index_video(Path(d) / "check.mp4", seconds=2, fps=10, gop=5)
        frames = frames_at(path, [0.0, 1.05, 1.95], cache=None)
        got = [read_index(f.image) for f in frames]
    if got == [0, 10, 19]:
        return Check("PyAV decoding", "ok", "H.264 encode and frame-exact decode work")
    return Check("PyAV decoding", "fail", f"decoded frames {got}, expected [0, 10, 19]: reinstall av")


def _sandbox() -> Check:
    from videvolve.skill_library.sandbox import get_sandbox

    try:
        sb = get_sandbox()
    except VidevolveError as exc:
        return Check("sandbox", "fail", str(exc))
    if sb.mode == "bwrap":
        return Check("sandbox", "ok", f"bubblewrap, interpreter {sb.python}")
    return Check("sandbox", "warn", "no bubblewrap: falling back to unshare (install bubblewrap)")


def _image_url(width: int = 64, height: int | None = None) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (width, height or width), (40, 90, 200)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


class _Client:
    """Plain HTTP to the endpoint with the API key on every request (what doctor sees is what the server said)."""

    def __init__(self, settings: ModelSettings, api_key: str | None) -> None:
        self.base = (settings.base_url or "").rstrip("/")
        self.model = settings.model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def get_models(self) -> httpx.Response:
        with total_timeout_client(10) as client:  # within 10 s in all, not per read
            return client.get(f"{self.base}/models", headers=self.headers)

    def chat(self, content: Any, tools: list[dict[str, Any]] | None = None,
             extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The reply's JSON; ModelRequestError with the server's message on an HTTP error."""
        body: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": content}],
                                "max_tokens": 64, "temperature": 0, **(extra or {})}
        if tools:
            body["tools"] = tools
        try:
            with total_timeout_client(120) as client:
                r = client.post(f"{self.base}/chat/completions", headers=self.headers, json=body)
        except httpx.HTTPError as exc:
            raise InfraError(f"{self.base} did not answer: {exc}") from exc
        if r.status_code != 200:
            try:
                err = r.json().get("error")
                message = err.get("message") if isinstance(err, dict) else err
            except ValueError:
                message = r.text[:300]
            raise ModelRequestError(f"HTTP {r.status_code}: {message}")
        data: dict[str, Any] = r.json()
        return data


TOOL = {"type": "function", "function": {"name": "final_answer", "description": "Give the answer.",
                                         "parameters": {"type": "object", "properties": {
                                             "answer": {"type": "string"}}, "required": ["answer"]}}}
QWEN25_TEMPLATE = ("for Qwen2.5-VL also a tool-capable --chat-template (its own template has no tool section; "
                   "e.g. vLLM's examples/tool_chat_template_hermes.jinja)")


def _tool_check(client: _Client) -> Check:
    """Which case the server is in, and the exact fix.

    vLLM without a tool parser refuses every request that carries tools (400, renderers/online_renderer.py:278-281);
    a 200 therefore means the parser is loaded, and a reply without a call is the model's doing.
    """
    try:
        reply = client.chat("Call final_answer with answer 'A'.", [TOOL])
    except InfraError as exc:
        return Check("tool calling", "fail", str(exc))
    except ModelRequestError as exc:
        if server_misconfigured(str(exc)):
            return Check("tool calling", "fail", f"the server has no tool parser ({exc}): every request with tools "
                         f"will be refused; restart vLLM with {TOOL_FLAGS}")
        return Check("tool calling", "fail", f"a request with tools was refused: {exc}")
    message = (reply.get("choices") or [{}])[0].get("message") or {}
    if message.get("tool_calls"):
        return Check("tool calling", "ok", "the server parses tool calls (auto tool choice is on)")
    if "<tool_call>" in str(message.get("content") or ""):
        return Check("tool calling", "warn", "the server takes tools but returned the model's <tool_call> text "
                     "unparsed (videvolve parses it); for the server to parse it use --tool-call-parser hermes")
    return Check("tool calling", "warn", "the server has a tool parser (it took a request with tools), but the model "
                 "made no tool call when asked to: coevowhen_base needs a model that calls tools; "
                 f"{QWEN25_TEMPLATE}")


def _images_check(client: _Client) -> Check:
    accepted = 0
    for n in (1, 4, 16, 64):
        content = [{"type": "image_url", "image_url": {"url": _image_url()}} for _ in range(n)]
        try:
            client.chat([*content, {"type": "text", "text": "How many images?"}])
            accepted = n
        except ModelRequestError:
            break
        except InfraError as exc:
            return Check("images per request", "fail", str(exc))
    if accepted >= 64:
        return Check("images per request", "ok", f"{accepted}+ accepted")
    return Check("images per request", "warn", f"at most {accepted}: raise vLLM's --limit-mm-per-prompt "
                 "'{\"image\":64}'")


CALIBRATION_SIZES = ((160, 90), (320, 180), (640, 360), (1280, 720), (1920, 1080))


def calibrate(client: _Client, family: str, max_pixels: int | None = None) -> list[tuple[int, int, int, int]]:
    """(width, height, server's image tokens, formula's) for images of known sizes.

    The server's figure is the difference of ``usage.prompt_tokens`` with and without the image (same text).
    """
    from videvolve.models.cost import cost_model

    cost = cost_model(family, max_pixels)
    text = {"type": "text", "text": "Describe the image."}
    base = int(client.chat([text])["usage"]["prompt_tokens"])
    rows = []
    for w, h in CALIBRATION_SIZES:
        with_image = int(client.chat([{"type": "image_url", "image_url": {"url": _image_url(w, h)}},
                                      text])["usage"]["prompt_tokens"])
        rows.append((w, h, with_image - base, cost.image_tokens(w, h)))
    return rows


CALIBRATION_CLIPS = (4, 7, 16, 33)
"""Frame counts of the clips ``doctor --calibrate --video`` sends (odd ones included: Qwen2.5-VL's own loader
cannot decode an odd count)."""


@dataclass(frozen=True)
class ClipRow:
    """One calibration clip: its frames and size, the server's tokens for it and the formula's."""

    frames: int
    width: int
    height: int
    server: int
    formula: int
    implied_frames: int | None
    """The largest frame count whose formula matches the server's tokens (None: none does)."""


def calibrate_clips(client: _Client, family: str, video: Path, max_side: int = 448, max_pixels: int | None = None,
                    rate: float = 2.0, clip_kwargs: str = "request") -> list[ClipRow]:
    """Clips of :data:`CALIBRATION_CLIPS` frames cut from ``video``, sent exactly as evaluations send them.

    The server's tokens for a clip are the difference of ``usage.prompt_tokens`` with and without it; the frames
    it decoded are those whose formula gives that figure.
    """
    from videvolve.media import clip as make_clip
    from videvolve.media import probe
    from videvolve.models.cost import cost_model
    from videvolve.models.openai_backend import media_request

    cost = cost_model(family, max_pixels)
    duration = probe(video).duration
    text = {"type": "text", "text": "Describe the clip."}
    base = int(client.chat([text])["usage"]["prompt_tokens"])
    rows = []
    with tempfile.TemporaryDirectory(prefix="videvolve-calibrate-") as d:
        for n in CALIBRATION_CLIPS:
            fps = rate if n / rate <= duration else n / duration
            info = make_clip(video, 0.0, n / fps, Path(d) / f"clip{n}.mp4", fps=fps, max_side=max_side)
            url = "data:video/mp4;base64," + base64.b64encode(Path(info.path).read_bytes()).decode()
            part = {"type": "video_url", "video_url": {"url": url}, "num_frames": info.frame_count}
            sent, extra = media_request([{"role": "user", "content": [part, text]}], family, clip_kwargs)
            served = int(client.chat(sent[0]["content"], extra=extra)["usage"]["prompt_tokens"]) - base
            formula = cost.video_tokens(info.width, info.height, info.frame_count, fps)
            implied = next((k for k in range(768, 0, -1)
                            if cost.video_tokens(info.width, info.height, k, fps) == served), None)
            rows.append(ClipRow(info.frame_count, info.width, info.height, served, formula, implied))
    return rows


def _clip_calibration_check(client: _Client, family: str, video: Path, max_pixels: int | None = None,
                            clip_kwargs: str = "request") -> Check:
    try:
        rows = calibrate_clips(client, family, video, max_pixels=max_pixels, clip_kwargs=clip_kwargs)
    except (InfraError, ModelRequestError, VidevolveError, KeyError, TypeError) as exc:
        fix = (f" -- restart vLLM with --trust-request-mm-kwargs (serve-vllm sets it), or with {SERVER_CLIP_FLAGS} "
               "and pass --clip-kwargs server" if refuses_request_mm_kwargs(str(exc)) else "")
        return Check("clip calibration", "fail", f"could not calibrate clips on {video}: {exc}{fix}")
    worst = max(abs(r.server - r.formula) / max(r.server, 1) for r in rows)
    detail = "; ".join(f"{r.frames} frames {r.width}x{r.height}: server {r.server}, formula {r.formula}"
                       + ("" if r.server == r.formula or r.implied_frames is None else
                          f" (the server's count is that of {r.implied_frames} frames)") for r in rows)
    fix = "" if worst < 0.01 else (" -- the server does not decode the frames sent: check --family "
                                   f"({family}), and that the server was started as --clip-kwargs {clip_kwargs} "
                                   "says (docs/reference/vllm.md)")
    return Check("clip calibration", "ok" if worst < 0.01 else "fail", f"{detail}; worst {worst:.1%}{fix}")


def _calibration_check(client: _Client, family: str, max_pixels: int | None = None) -> Check:
    try:
        rows = calibrate(client, family, max_pixels)
    except (InfraError, ModelRequestError, KeyError, TypeError) as exc:
        return Check("calibration", "fail", f"could not calibrate: {exc}")
    worst = max(abs(s - f) / max(s, 1) for _, _, s, f in rows)
    detail = "; ".join(f"{w}x{h}: server {s}, formula {f} (error {f - s:+d})" for w, h, s, f in rows)
    fix = "" if worst < 0.02 else (f" -- check --family ({family}), and give the server's --mm-processor-kwargs "
                                   f"max_pixels as --max-pixels ({max_pixels})")
    return Check("calibration", "ok" if worst < 0.02 else "warn", f"{detail}; worst {worst:.1%}{fix}")


def _endpoint(settings: ModelSettings, calibration: bool = False, video: Path | None = None) -> list[Check]:
    from videvolve.models.context import model_cards
    from videvolve.models.openai_backend import api_key_of

    client = _Client(settings, api_key_of(settings))
    checks = []
    try:
        r = client.get_models()
        if r.status_code in (401, 403):
            return [Check("endpoint", "fail", f"{client.base} refuses our API key ({r.status_code}): put the "
                          "server's --api-key "
                          f"in the environment variable {settings.api_key_env} (--api-key-env names another)")]
        r.raise_for_status()
        models = model_cards(r.json().get("data", []))  # the entries the commands read (:func:`served_names`)
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return [Check("endpoint", "fail", f"{client.base}/models did not answer ({exc}); start the server (e.g. "
                      f"`vllm serve <model> --port 8000`) and pass --base-url http://HOST:PORT/v1")]
    names = list(dict.fromkeys(m["id"] for m in models))
    checks.append(Check("endpoint", "ok", f"{client.base} serves {', '.join(map(str, names)) or 'no models'}"))
    if "model" not in settings.model_fields_set and len(names) == 1:  # what every command would use
        settings = settings.model_copy(update={"model": names[0]})
        client = _Client(settings, api_key_of(settings))
        checks.append(Check("model name", "ok", f"{settings.model} (the one served: used when --model is not given)"))
    elif "model" not in settings.model_fields_set:
        checks.append(Check("model name", "fail", f"no --model given and the endpoint serves {len(names)} models: "
                            f"pass --model with one of {names}"))
        return checks
    elif settings.model not in names:
        checks.append(Check("model name", "fail", f"--model {settings.model!r} is not served; use one of {names}"))
        return checks
    else:
        checks.append(Check("model name", "ok", settings.model))
    max_len = next((m.get("max_model_len") for m in models if m.get("id") == settings.model), None)
    checks.append(Check("context length", "ok" if max_len else "warn",
                        f"{max_len} tokens" if max_len else "not reported; pass --max-model-len to vllm serve"))
    try:
        reply = client.chat("Reply with the word ready.")
        text = str(((reply.get("choices") or [{}])[0].get("message") or {}).get("content") or "")
        checks.append(Check("chat", "ok", f"replied {text[:40]!r}"))
    except (InfraError, ModelRequestError) as exc:
        checks.append(Check("chat", "fail", str(exc)))
        return checks
    checks.append(_tool_check(client))
    checks.append(_images_check(client))
    if calibration:
        checks.append(_calibration_check(client, settings.family, settings.max_pixels))
        if video is not None:
            checks.append(_clip_calibration_check(client, settings.family, video, settings.max_pixels,
                                                  settings.clip_kwargs))
    return checks


def run_checks(settings: ModelSettings, calibration: bool = False, video: Path | None = None,
               context: int | None = None) -> list[Check]:
    """Every check, in order; endpoint checks only for the openai backend (``calibration``: image token counts).

    With ``video``: the largest request each program seed makes on it, against the served context (or ``context``);
    with ``calibration`` too, clips cut from it (frames decoded and tokens counted by the server against the meter).
    """
    checks = [_decoding(), _sandbox()]
    if settings.backend == "openai":
        checks += _endpoint(settings, calibration, video)
    else:
        checks.append(Check("endpoint", "skip", "backend sim (offline SimVLM): nothing to reach"))
    if video is not None:
        from videvolve.media.check import check_video

        found = check_video(video)  # probed, and decoded at times spread over it (`videos check` on one file)
        status = {"ok": "ok", "slow": "warn"}.get(found.status, "fail")
        checks.append(Check("video", status, f"{video}: " + ("; ".join(found.notes) or
                                                              "probed, and frames spread over it decode")))
        served = next((int(c.detail.split()[0]) for c in checks if c.name == "context length" and c.status == "ok"),
                      None)
        if found.info is not None:  # it probed (a damaged file still has a size to check)
            checks += _seed_requests(settings, video, context or served or 32768, settings.context_margin)
    return checks


def _seed_requests(settings: ModelSettings, video: Path, context: int, margin: float) -> list[Check]:
    """The largest request of each program seed on this video, against the context less its margin."""
    from videvolve.media import probe
    from videvolve.models.cost import cost_model
    from videvolve.skill_library.seed_requests import PROGRAM_SEEDS, largest_request

    info = probe(video)
    limit = int(context * (1 - margin))
    cost = cost_model(settings.family, settings.max_pixels)
    out = []
    for seed in PROGRAM_SEEDS:
        tokens = largest_request(seed, cost, (info.width, info.height))
        fits = tokens <= limit
        fix = "" if fits else (" — lower the seed's max_side / refine_max_side or frames in its config.toml, or "
                               "serve a longer --max-model-len")
        out.append(Check(f"largest request: {seed}", "ok" if fits else "fail",
                         f"{tokens:,} prompt tokens on {info.width}x{info.height} ({settings.family}) against "
                         f"{limit:,} ({context:,} less {margin:.0%}){fix}"))
    out.append(Check("largest request: coevowhen_base", "skip", "its model chooses what to look at; each request is "
                     "checked against the context before it is sent"))
    return out
