"""Command-line flags generated from the settings models, so that a setting is written once.

Each field of a pydantic settings model becomes ``--field-name`` (or the name in its ``json_schema_extra["flag"]``
or ``["flat"]``) with the field's type, its choices when it is a ``Literal``, and its description as the help.
Every flag defaults to ``None`` so that only what the user typed overrides a ``--config`` file or a resumed run's
settings. A field marked ``json_schema_extra["section"]`` holds a settings model of its own: its flags form an
argument group, and :func:`given` returns them nested under the field's name.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from videvolve.errors import UsageError


def _extra(field: FieldInfo) -> dict[str, Any]:
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


def flag_name(name: str, field: FieldInfo) -> str:
    """``--field-name``, the field's own ``flag``, or ``--flat-name`` of a field that has a ``flat`` name."""
    extra = _extra(field)
    return str(extra.get("flag") or "--" + str(extra.get("flat") or name).replace("_", "-"))


def section_of(field: FieldInfo) -> type[BaseModel] | None:
    """The settings model of a field marked as a section of flags, else None."""
    tp = field.annotation
    if _extra(field).get("section") and isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    return None


def _strip_optional(tp: Any) -> Any:
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _list_of(item: Callable[[str], Any], what: str) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        try:
            return [item(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}s, e.g. 1,2,3; got {text!r}") from None
    return parse


def _argument(field: FieldInfo) -> dict[str, Any] | None:
    """Argparse keywords for a field, or None when it cannot be a flag (a nested model)."""
    tp = _strip_optional(field.annotation)
    origin = get_origin(tp)
    if origin is Literal:
        return {"choices": [str(c) for c in get_args(tp)]}
    if origin is list:
        (item,) = get_args(tp)
        return {"type": _list_of(item, item.__name__), "metavar": f"{item.__name__.upper()},..."}
    if tp is bool:  # a switch that is off by default is one flag; one that is on gets its --no- form
        if field.get_default() is False:
            return {"action": "store_const", "const": True}
        return {"action": argparse.BooleanOptionalAction}
    if tp in (int, float, str):
        return {"type": tp}
    return None


def _help(field: FieldInfo) -> str:
    text = field.description or ""
    if field.is_required():
        return text.replace("%", "%%")
    default = field.get_default(call_default_factory=True)
    if default not in (None, [], "", False):
        shown = ",".join(map(str, default)) if isinstance(default, list) else default
        text += f" (default {shown})"
    return text.replace("%", "%%")


def add_settings(parser: argparse.ArgumentParser | Any, model: type[BaseModel], skip: Iterable[str] = ()) -> None:
    """One flag per field of ``model`` (nested models and ``skip`` left out)."""
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        kwargs = _argument(field)
        if kwargs is None:
            continue
        shown = str(_extra(field).get("flat") or name).upper()
        kwargs.setdefault("metavar", None if "choices" in kwargs or "action" in kwargs else shown)
        parser.add_argument(flag_name(name, field), dest=f"{model.__name__}.{name}", default=None,
                            help=_help(field), **kwargs)


def add_sections(parser: argparse.ArgumentParser, model: type[BaseModel], title: str,
                 skip: Iterable[str] = ()) -> dict[str, Any]:
    """The flags of ``model``'s own fields in a group ``title``, then a group per section; the groups by section name.

    The groups print in this order in ``--help``, so the flags read in sections.
    """
    add_settings(parser.add_argument_group(title), model, skip)
    groups = {}
    for name, field in model.model_fields.items():
        section = section_of(field)
        if section is not None and name not in skip:
            groups[name] = parser.add_argument_group(f"{name} settings", field.description)
            add_settings(groups[name], section)
    return groups


def given(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The fields of ``model`` the user gave on the command line (those of a section nested under its name)."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        section = section_of(field)
        if section is not None:
            inner = given(args, section)
            if inner:
                out[name] = inner
            continue
        value = getattr(args, f"{model.__name__}.{name}", None)
        if value is not None:
            out[name] = value
    return out


def merged(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``update`` laid over it, nested dicts merged key by key (a section's other keys kept)."""
    out = dict(base)
    for key, value in update.items():
        old = out.get(key)
        out[key] = merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def build(model: type[BaseModel], data: dict[str, Any], source: str) -> Any:
    """``model`` from data, with pydantic's complaints in plain words naming where the data came from."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_where(model, e['loc'])}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"invalid settings in {source}: {problems}") from None


def _where(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """A setting's dotted name, with the flag that sets it (``gate.curtail (--curtail)``) where there is one."""
    dotted = ".".join(map(str, loc)) or "settings"
    for i, key in enumerate(loc):
        field = model.model_fields.get(str(key))
        if field is None:
            return dotted
        tp = field.annotation
        if not (isinstance(tp, type) and issubclass(tp, BaseModel)):  # a setting, not a section of them
            return f"{dotted} ({flag_name(str(key), field)})" if i == len(loc) - 1 and _argument(field) else dotted
        model = tp
    return dotted
