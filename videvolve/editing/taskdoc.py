"""The workspace's ``TASK.md``: goal, the gate's rule, the rules, the budgets, the tools and an SDK reference.

The SDK reference is generated from ``videvolve/skill_library/sdk.py``'s own signatures and docstrings (one source).
"""

from __future__ import annotations

import inspect

from videvolve.editing.base import MAX_EDIT_BYTES, EditorInput
from videvolve.skill_library import sdk
from videvolve.skill_library.bootstrap import ALLOWED_MODULES

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
    return "; ".join(parts) + "; and videvolve_sdk"


def task_md(inp: EditorInput, limits: object, tools_doc: str) -> str:
    """The whole ``TASK.md``."""
    budget = "\n".join(f"- {name}: {value}" for name, value in vars(limits).items()) if hasattr(limits, "__dict__") \
        else str(limits)
    feedback = f"\n## Your previous submission failed validation\n\n{inp.feedback}\n" if inp.feedback else ""
    return f"""# Improve the harness in `candidate/`

A frozen vision-language model answers questions about long videos through an executable harness: the folder
`candidate/` (a copy of version {inp.incumbent}; the original stays untouched). Make it score higher on questions
it has not seen, at a cost the gate accepts. Read the traces of this batch's training tasks (`traces/`), the
diagnoses (`diagnoses.md`), similar past diagnoses (`memory.md`) and the history (`lineage.md`); try changes with
`trial` (training tasks of this batch only) and look at videos with `probe`; then `submit`.

## The gate

{inp.gate_rule or "(the run did not state its rule)"}

It is applied on a held-out selection set you never see; what you learn from training tasks must generalise.

## Rules

- Editable files (paths relative to `candidate/`): {EDITABLE_TEXT}; at most {MAX_EDIT_BYTES} bytes each.
  Anything else you change is not taken back.
- Harness code may import only: {allowed_imports()}. No file, network or process access; names starting with `_`
  are refused by a static check before anything runs.
- Every frame, sheet or clip shown to the model costs visual tokens; `ctx.budget` (if set) caps distinct frames.
- Operators already tried on this parent: {", ".join(inp.tried) or "none"}.
{feedback}
## Budgets of this proposal

{budget}

## Tools

{tools_doc}

{sdk_reference()}
"""
