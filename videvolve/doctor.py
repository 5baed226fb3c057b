"""``videvolve doctor``: check decoding, the sandbox and the model endpoint, and say what to fix."""

from __future__ import annotations

import base64
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx
from PIL import Image

from videvolve.config import ModelSettings
from videvolve.errors import InfraError, ModelRequestError, VidevolveError


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


def _image_url(size: int = 64) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), (40, 90, 200)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _endpoint(settings: ModelSettings) -> list[Check]:
    from videvolve.models import make_vlm

    base = (settings.base_url or "").rstrip("/")
    checks = []
    try:
        r = httpx.get(f"{base}/models", timeout=10)
        r.raise_for_status()
        models = r.json().get("data", [])
    except (httpx.HTTPError, ValueError) as exc:
        return [Check("endpoint", "fail", f"{base}/models did not answer ({exc}); start the server (e.g. "
                      f"`vllm serve <model> --port 8000`) and pass --base-url http://HOST:PORT/v1")]
    names = [m.get("id") for m in models]
    checks.append(Check("endpoint", "ok", f"{base} serves {', '.join(map(str, names)) or 'no models'}"))
    if settings.model not in names:
        checks.append(Check("model name", "fail", f"--model {settings.model!r} is not served; use one of {names}"))
        return checks
    checks.append(Check("model name", "ok", settings.model))
    max_len = next((m.get("max_model_len") for m in models if m.get("id") == settings.model), None)
    checks.append(Check("context length", "ok" if max_len else "warn",
                        f"{max_len} tokens" if max_len else "not reported; pass --max-model-len to vllm serve"))
    vlm = make_vlm(settings)
    try:
        reply = vlm.complete([{"role": "user", "content": "Reply with the word ready."}])
        checks.append(Check("chat", "ok", f"replied {reply.text[:40]!r}"))
    except (InfraError, ModelRequestError) as exc:
        checks.append(Check("chat", "fail", str(exc)))
        return checks
    tool = {"type": "function", "function": {"name": "final_answer", "description": "Give the answer.",
                                             "parameters": {"type": "object", "properties": {
                                                 "answer": {"type": "string"}}, "required": ["answer"]}}}
    try:
        reply = vlm.complete([{"role": "user", "content": "Call final_answer with answer 'A'."}], [tool])
        ok = any(c.name == "final_answer" for c in reply.tool_calls)
        checks.append(Check("tool calling", "ok" if ok else "warn", "the model called the tool" if ok else
                            "no tool call came back: coevowhen_base needs `vllm serve ... --enable-auto-tool-choice "
                            "--tool-call-parser hermes`"))
    except (InfraError, ModelRequestError) as exc:
        checks.append(Check("tool calling", "fail", f"{exc}; start vLLM with --enable-auto-tool-choice "
                            "--tool-call-parser hermes"))
    accepted = 0
    for n in (1, 4, 16, 64):
        content = [{"type": "image_url", "image_url": {"url": _image_url()}} for _ in range(n)]
        try:
            vlm.complete([{"role": "user", "content": [*content, {"type": "text", "text": "How many images?"}]}])
            accepted = n
        except ModelRequestError:
            break
        except InfraError as exc:
            checks.append(Check("images per request", "fail", str(exc)))
            return checks
    status = "ok" if accepted >= 64 else "warn"
    checks.append(Check("images per request", status, f"{accepted}+ accepted" if accepted >= 64 else
                        f"at most {accepted}: raise vLLM's --limit-mm-per-prompt '{{\"image\":64}}'"))
    return checks


def run_checks(settings: ModelSettings) -> list[Check]:
    """Every check, in order; endpoint checks only for the openai backend."""
    checks = [_decoding(), _sandbox()]
    if settings.backend == "openai":
        checks += _endpoint(settings)
    else:
        checks.append(Check("endpoint", "skip", "backend sim (offline SimVLM): nothing to reach"))
    return checks
