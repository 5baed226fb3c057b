"""Edits of a harness's own files that the heuristic editor's moves are made of: TOML keys, routing by kind."""

from __future__ import annotations

import re
import tomllib
from typing import Any

Files = dict[str, str]


def set_key(text: str, key: str, value: Any) -> str:
    """Set ``key = value`` in TOML text, keeping every comment and other line."""
    rendered = "true" if value is True else "false" if value is False else repr(value) if isinstance(value, str) \
        else str(value)
    line = f"{key} = {rendered}"
    pattern = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    if pattern.search(text):
        return pattern.sub(line, text, count=1)
    return text.rstrip("\n") + f"\n{line}\n"


def config_of(files: Files) -> dict[str, Any]:
    """The parsed config.toml ({} when absent or broken)."""
    try:
        return tomllib.loads(files.get("config.toml", ""))
    except tomllib.TOMLDecodeError:
        return {}


CFG_FUNCTION = '''

def _cfg(ctx, task):
    """The config, with this question kind's own settings (config.toml's mcq.* / grounding.* keys) over it."""
    merged = dict(ctx.config)
    merged.update(ctx.config.get(task.kind) or {})
    return merged
'''


def routed(files: Files) -> Files | None:
    """``solver.py`` reading its settings per question kind (``mcq.n_frames = ...`` overrides ``n_frames``)."""
    solver = files.get("solver.py", "")
    if "def _cfg(" in solver:
        return {}
    if "def solve(task" not in solver or "ctx.config" not in solver:
        return None
    body = solver.replace("cfg = ctx.config\n", "cfg = _cfg(ctx, task)\n").replace("ctx.config.get(",
                                                                                     "_cfg(ctx, task).get(")
    return {"solver.py": body.rstrip("\n") + "\n" + CFG_FUNCTION}


def frame_key(cfg: dict[str, Any]) -> str | None:
    """The config key holding the frame count (``n_frames`` or ``frames``)."""
    return next((k for k in ("n_frames", "frames") if k in cfg), None)
