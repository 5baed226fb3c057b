"""The editors' prompts and the workspace's ``TASK.md``, rendered from template files and the code they describe.

The templates are ``editing/prompts/*.j2`` (Jinja2); what they say about the code is filled in from it: the allowed
imports from the static check's allowlist, ``ctx``'s members and the SDK reference from
``videvolve/skill_library/sdk.py``'s own signatures and docstrings, the reply shape from the reply's model.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from importlib import resources
from typing import Any

from jinja2 import Environment, StrictUndefined
from pydantic import BaseModel

from videvolve.editing.base import MAX_EDIT_BYTES, EditorInput
from videvolve.skill_library import sdk
from videvolve.skill_library.bootstrap import ALLOWED_MODULES
from videvolve.skill_library.static_check import parse

EDITABLE_TEXT = ("SKILL.md (the policy, the model's system prompt), config.toml, solver.py (def solve(task, ctx)), "
                 "references/<name>.md, tools/<name>/tool.json and tools/<name>/tool.py")
SDK_CLASSES = (sdk.TaskView, sdk.HarnessContext, sdk.Observation, sdk.ModelReply, sdk.Tool, sdk.SDKError,
               sdk.BudgetExceeded)


def sdk_reference() -> str:
    """Markdown for every public class and method of the harness SDK, from its docstrings."""
    out = ["## SDK reference (`from videvolve_sdk import ...`)", ""]
    for cls in SDK_CLASSES:
        out += [f"### {cls.__name__}", inspect.getdoc(cls) or "", ""]
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_"):
                continue
            sig = str(inspect.signature(fn)).replace("'", "").replace("(self, ", "(").replace("(self)", "()")
            out.append(f"- `{name}{sig}`: {(inspect.getdoc(fn) or '').strip()}")
        out.append("")
    return "\n".join(out)


def allowed_imports() -> str:
    """The static check's allowlist, in words."""
    parts = []
    for mod, names in sorted(ALLOWED_MODULES.items()):
        parts.append(mod if names is None else f"{mod} ({', '.join(sorted(names))})")
    return "; ".join(parts) + ("" if "videvolve_sdk" in ALLOWED_MODULES else "; and videvolve_sdk")


def task_md(inp: EditorInput, limits: object, tools_doc: str) -> str:
    """The whole ``TASK.md``."""
    budget = "\n".join(f"- {name}: {value}" for name, value in vars(limits).items()) if hasattr(limits, "__dict__") \
        else str(limits)
    feedback = f"\n## Your previous submission failed validation\n\n{inp.feedback}\n" if inp.feedback else ""
    return render("task.md.j2", incumbent=inp.incumbent, gate_rule=inp.gate_rule or "(the run did not state its rule)",
                  editable=EDITABLE_TEXT, max_edit_bytes=MAX_EDIT_BYTES, allowed_imports=allowed_imports(),
                  tried=", ".join(inp.tried) or "none", feedback=feedback, budget=budget, tools_doc=tools_doc,
                  sdk_reference=sdk_reference())


def render(template: str, **values: Any) -> str:
    """A template of ``editing/prompts/`` filled in (every placeholder must be given)."""
    text = (resources.files("videvolve.editing") / "prompts" / template).read_text(encoding="utf-8")
    return _ENV.from_string(text).render(**values)


def ctx_members() -> list[str]:
    """One line per public attribute and method of the harness's ``ctx``: its call and its docstring's first line."""
    init = parse(textwrap.dedent(inspect.getsource(sdk.HarnessContext.__init__)))
    names = [t.attr for node in ast.walk(init) if isinstance(node, ast.Assign | ast.AnnAssign)
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
             if isinstance(t, ast.Attribute) and not t.attr.startswith("_")]
    out = [f"ctx.{', ctx.'.join(names)}: {inspect.getdoc(sdk.HarnessContext)}"]
    for name, fn in inspect.getmembers(sdk.HarnessContext, inspect.isfunction):
        if name.startswith("_"):
            continue
        params = [_param(p) for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        doc = (inspect.getdoc(fn) or "").split("\n")[0]
        out.append(f"ctx.{name}({', '.join(params)}): {doc}")
    return out


def _param(p: inspect.Parameter) -> str:
    if p.kind is inspect.Parameter.VAR_KEYWORD:
        return f"**{p.name}"
    return p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"


def json_shape(model: type[BaseModel]) -> str:
    """A model's fields as the one-line JSON shape a prompt asks for: ``{"a": str, "b": [{"c": str}]}``."""
    fields = []
    for name, f in model.model_fields.items():
        args = typing.get_args(f.annotation)
        if typing.get_origin(f.annotation) is list and args and isinstance(args[0], type) and \
                issubclass(args[0], BaseModel):
            fields.append(f'"{name}": [{json_shape(args[0])}]')
        else:
            fields.append(f'"{name}": {getattr(f.annotation, "__name__", f.annotation)}')
    return "{" + ", ".join(fields) + "}"


_ENV = Environment(undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                   autoescape=False)  # prompts are plain text, never HTML
