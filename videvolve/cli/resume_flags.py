"""What ``evolve --resume`` takes from the command line: a run continues as it started, on a server that may move.

A flag that would change what the run asks or how it judges is refused with what the run has; the stop settings may
grow (``EXTENDABLE``); where the model server is and how this machine runs the tasks (:data:`MOVABLE`) may change,
since a vLLM restarted on another port or host serves the same checkpoint (results are keyed by the checkpoint the
endpoint reports, not its address). Nothing given is silently ignored.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from videvolve.cli.flags import build, flag_name, given, merged, section_of
from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import UsageError
from videvolve.rundir import RunDir

M = TypeVar("M", bound=BaseModel)
EXTENDABLE = "stop"
"""The section of settings that may grow on ``--resume`` (iterations, hours, call and token budgets)."""
MOVABLE = {"model": frozenset({"base_url", "api_key_env", "timeout_s", "max_retries", "retry_window_s",
                               "clip_kwargs"}),
           "runtime": frozenset({"concurrency", "warm_sandboxes"})}
"""The solver's and the runtime's settings a resumed run takes anew: where the server is, how long to wait for it,
whether it was started with the clip settings or takes them with each request (the same frames either way), how
many tasks run at once. Everything else in those sections changes what is asked or what a task may spend."""
HELPER_FLAGS = {("editor", "model"): ("--editor-model", "--editor-base-url"),
                ("investigator", "agent_model"): ("--investigator-agent-model", "--investigator-agent-base-url"),
                ("investigator", "model"): ("--investigator-model", None)}


def helper_models(args: argparse.Namespace, solver: ModelSettings, ask: bool = False
                  ) -> dict[tuple[str, str], dict[str, Any]]:
    """The editor's and the investigator's models the flags name: the solver's settings on another model or URL.

    ``ask``: the solver's model was not named (found at its endpoint, or SimVLM), so a helper on another URL without
    a name of its own is the one model that URL serves (:func:`with_served_model`), not the solver's name sent there.
    """
    from videvolve.models.openai_backend import with_served_model

    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (section, key), (name_flag, url_flag) in HELPER_FLAGS.items():
        name = getattr(args, _dest(name_flag), None)
        url = getattr(args, _dest(url_flag), None) if url_flag else None
        if key == "model" and section == "investigator":
            if name:
                out[(section, key)] = solver.model_copy(update={"model": name}).model_dump()
        elif name or url:
            update = {"backend": "openai", "model": name or solver.model, "base_url": url or solver.base_url}
            helper = solver.model_copy(update=update)
            if ask and not name and url != solver.base_url:
                unnamed = {k: v for k, v in helper.model_dump().items() if k != "model"}
                helper = with_served_model(ModelSettings.model_validate(unnamed), how=f"{name_flag} NAME")
            out[(section, key)] = helper.model_dump()
    return out


def resumed_endpoints(args: argparse.Namespace, data: dict[str, Any]) -> list[str]:
    """Apply the movable model and runtime flags to the stored ``data``; the flags that would change it otherwise.

    Each change is ``--flag new (the run has old)``; ``--config`` is one too (a resumed run reads its own settings).
    A solver that moved (``--base-url``) takes the editor's and the investigator's models on its old address along.
    """
    changed = [f"--config {args.config} (a resumed run reads its own {RunDir(Path(args.run)).settings.name})"] \
        if getattr(args, "config", None) else []
    for section, cls in (("model", ModelSettings), ("runtime", RuntimeSettings)):
        stored = _validated(cls, data.get(section) or {}, section)
        for name, value in given(args, cls).items():
            new = _validated(cls, {**stored.model_dump(), name: value}, section)
            if name in MOVABLE[section]:
                data.setdefault(section, {})[name] = getattr(new, name)
                if name == "base_url":
                    _move_helpers(data, getattr(stored, name), getattr(new, name))
            elif getattr(new, name) != getattr(stored, name):
                changed.append(f"{flag_name(name, cls.model_fields[name])} {getattr(new, name)} (the run has "
                               f"{getattr(stored, name)})")
    for (section, key), flags in HELPER_FLAGS.items():
        stored_model = (data.get(section) or {}).get(key)
        has = None if stored_model is None else _validated(ModelSettings, stored_model, f"{section}'s {key}")
        for flag, field in zip(flags, ("model", "base_url"), strict=True):
            value = getattr(args, _dest(flag), None) if flag else None
            if value and (has is None or getattr(has, field) != value):
                changed.append(f"{flag} {value} (the run has {'none' if has is None else getattr(has, field)})")
    return changed


def _move_helpers(data: dict[str, Any], old: str | None, new: str | None) -> None:
    """The editor's and the investigator's models that were on the solver's old address go where it went."""
    for section, key in HELPER_FLAGS:
        model = (data.get(section) or {}).get(key)
        if isinstance(model, dict) and model.get("base_url") == old and old is not None:
            model["base_url"] = new


def refuse_changes(run: Path, stored: dict[str, Any], flags: dict[str, Any], also: tuple[str, ...] | list[str] = ()
                   ) -> None:
    """``--resume`` continues a run as it was started: a flag that would change it (but EXTENDABLE) is refused.

    ``also``: changes found elsewhere (:func:`resumed_endpoints`). A ``--tasks`` naming the run's own tasks file, or
    a file of identical content, is accepted.
    """
    from videvolve.loop.context import Context, StopSettings

    before = build(Context, stored, str(RunDir(run).settings))
    after = build(Context, merged(stored, flags), "the command line")
    changed = [*_changes(before, after, {k: v for k, v in flags.items() if k != EXTENDABLE}), *also]
    if changed:
        grow = ", ".join(flag_name(k, f) for k, f in StopSettings.model_fields.items())
        move = ", ".join(sorted(flag_name(k, f) for section, cls in (("model", ModelSettings),
                                                                      ("runtime", RuntimeSettings))
                                for k, f in cls.model_fields.items() if k in MOVABLE[section]))
        raise UsageError(f"--resume continues {run} with the settings it started with, and these flags would change "
                         f"them: {'; '.join(changed)}. Drop them to continue the run, or start a new run with another "
                         f"--run (only {grow} may grow on --resume, and {move} may change).")


def _changes(before: Any, after: Any, flags: dict[str, Any]) -> list[str]:
    """``--flag new (the run has old)`` for each given flag whose setting differs (sections compared field by field)."""
    out = []
    for name, value in flags.items():
        field = type(before).model_fields[name]
        old, new = getattr(before, name), getattr(after, name)
        if section_of(field) is not None and isinstance(value, dict):
            out += _changes(old, new, value)
        elif old != new and not (name == "tasks" and _same_file(old, new)):
            out.append(f"{flag_name(name, field)} {new} (the run has {old})")
    return out


def _same_file(a: str, b: str) -> bool:
    pa, pb = Path(a), Path(b)
    try:
        return pa == pb or (pa.is_file() and pb.is_file() and pa.read_bytes() == pb.read_bytes())
    except OSError:
        return False


def _validated(cls: type[M], data: dict[str, Any], what: str) -> M:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"--resume: the {what} settings given or stored are not valid: {exc}") from None


def _dest(flag: str | None) -> str:
    return (flag or "").removeprefix("--").replace("-", "_")
