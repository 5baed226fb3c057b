"""Write the generated reference pages of the docs from the code: the CLI (argparse's own help) and the SDK.

``python docs/generate.py`` rewrites docs/reference/cli.md, sdk.md, operators.md, events.md and steps.md; ``--check``
exits 1 and names the stale pages (what tests/test_docs.py checks).
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
from pathlib import Path

from pydantic import BaseModel

HERE = Path(__file__).resolve().parent
PAGES = {"cli": HERE / "reference" / "cli.md", "sdk": HERE / "reference" / "sdk.md",
         "operators": HERE / "reference" / "operators.md", "events": HERE / "reference" / "events.md",
         "steps": HERE / "reference" / "steps.md"}
WIDTH = "100"  # argparse wraps help at $COLUMNS: fixed so the page does not depend on the terminal


def _subcommands(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(prefix, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _subcommands(sub, f"{prefix} {name}")
    return found


def cli_page() -> str:
    """Every command's ``--help``, as argparse prints it."""
    from videvolve.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        commands = _subcommands(build_parser(), "videvolve")
        out = ["# CLI reference", "",
               "Generated from the argument parser by `python docs/generate.py` (a test fails when this page and the "
               "code differ). Every command also runs as `python -m videvolve ...`.", ""]
        for name, parser in commands:
            parser.prog = name
            out += [f"## `{name}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(out)


def _api_section() -> list[str]:
    from videvolve import api

    out = ["## The Python API (`videvolve.api`)", "", inspect.getdoc(api) or "", ""]
    for name in ("load_harness", "resolve_harness", "evaluate", "LoadedHarness", "Answer"):
        obj = getattr(api, name)
        if inspect.isclass(obj):
            out += [f"### `{name}`", "", inspect.getdoc(obj) or "", ""]
            for member, fn in inspect.getmembers(obj, inspect.isfunction):
                if not member.startswith("_"):
                    sig = str(inspect.signature(fn)).replace("(self, ", "(").replace("(self)", "()")
                    out.append(f"- `{member}{sig}`: {(inspect.getdoc(fn) or '').strip()}")
            out.append("")
        else:
            out += [f"### `{name}{inspect.signature(obj)}`", "", inspect.getdoc(obj) or "", ""]
    return out


def sdk_page() -> str:
    """The harness SDK (what ``solver.py`` may call; the editor's TASK.md carries the same text) and the Python API."""
    from videvolve.editing.taskdoc import allowed_imports, sdk_reference

    body = sdk_reference().replace("## SDK reference", "## The harness SDK", 1)
    return "\n".join(["# SDK reference", "",
                      "Generated from the code's signatures and docstrings by `python docs/generate.py` (a test fails "
                      "when this page and the code differ). A harness's `solver.py` defines `solve(task, ctx)`; "
                      "`task` is a `TaskView`, `ctx` a `HarnessContext`.", "",
                      "Modules a harness may import (the static check's allowlist): " + allowed_imports() + ".", "",
                      body.replace("\n### ", "\n### ").rstrip(), "", *_api_section()]).rstrip() + "\n"


def operators_page() -> str:
    """The heuristic editor's catalogue: each move, what it changes, which diagnoses call for it."""
    from videvolve.editing.operators import CATALOGUE

    out = ["# The heuristic editor's moves", "",
           "Generated from `videvolve/editing/operators.py` by `python docs/generate.py`. The heuristic editor scores "
           "these by the batch's diagnoses (the weights) and by memory, prototypes the best few and one cost cut with "
           "`trial` on training tasks, and submits what the gate's rule would take there. A move marked *per kind* "
           "rewrites the solver to read `mcq.*` / `grounding.*` settings; a *cost cut* is tried beside the "
           "diagnoses' choices whenever it applies.", "",
           "| move | what it changes | called for by | kind |", "|---|---|---|---|"]
    for op in CATALOGUE:
        weights = ", ".join(f"{k} {v:g}" for k, v in sorted(op.weights.items(), key=lambda kv: -kv[1]))
        kind = " ".join(x for x in ("cost cut" if op.cost_cut else "", "per kind" if op.kinds else "") if x)
        out.append(f"| `{op.name}` | {op.summary} | {weights} | {kind or '-'} |")
    return "\n".join(out) + "\n"


def _type(annotation: object) -> str:
    """A field's type as a table cell shows it (``X | None`` as ``X`` or None: a bar would split the cell)."""
    text = re.sub(r"<(?:class|enum) '([\w.]+)'>", r"\1", str(annotation)).replace("typing.", "")
    text = re.sub(r"\b(?:[a-z_]\w*\.)+(?=[A-Z])", "", text)  # a class without its module's path
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text + "|"):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "|" and depth == 0:
            parts.append(text[start:i].strip().replace(" | ", " or "))
            start = i + 1
    named = [p for p in parts if p != "None"]
    return " or ".join(f"`{p}`" for p in named) + (" or None" if "None" in parts else "")


def _fields(model: type[BaseModel], skip: set[str]) -> list[str]:
    rows = ["| key | type | what |", "|---|---|---|"]
    for name, field in model.model_fields.items():
        if name not in skip:
            rows.append(f"| `{name}` | {_type(field.annotation)} | {field.description or ''} |")
    return rows


def events_page() -> str:
    """The kinds of the run's events (``search.events``), each with its keys."""
    from videvolve.search import events

    common = {"ts", "iteration", "node", "event"}
    out = ["# The run's events", "",
           "Generated from `videvolve/search/events.py` by `python docs/generate.py`. `RUN/events.jsonl` holds one "
           "JSON line per thing a node of `evolve` did, in order; each line has these keys, then those of its kind "
           "(told apart by `node` and `event`):", "", *_fields(events.EventBase, set()), "",
           "Read them with `videvolve.search.events.read_events(path)`, which gives each line as its kind's model. A "
           "torn last line (a write a kill stopped) is left out; a line of a kind this release does not know, or whose "
           "keys do not fit its kind (another release's), is kept as an `UnknownEvent` with all its keys (the second "
           "with a warning in the log); a JSON line without `iteration`, `node` and `event` is left out with a "
           "warning; a line that is not JSON stops the reader with its line number. A key a later release added "
           "reads as None (or empty) in an older run's file.", ""]
    for kind in events.KINDS:
        values = {key: " or ".join(f"`{v}`" for v in events._values(kind, key)) for key in ("node", "event")}
        out += [f"## {kind.__name__}: {values['node']} / {values['event']}", "", inspect.getdoc(kind) or "", "",
                *_fields(kind, common), ""]
    return "\n".join(out).rstrip() + "\n"


def steps_page() -> str:
    """The kinds of a task's trace steps (``skill_library.steps``), each with its keys."""
    from videvolve.skill_library import steps, trace

    common = {"step", "event"}
    out = ["# A task's trace steps", "",
           "Generated from `videvolve/skill_library/steps.py` by `python docs/generate.py`. A task's trace "
           "(`RUN/evals/<version>/<split>/traces/<task>.jsonl`, `eval --out`'s `traces/`, the editor's "
           "`traces/<task>/steps.jsonl`) holds one JSON line per step its harness took, in order; each line has these "
           "keys, then those of its kind (told apart by `event`):", "", *_fields(steps.TraceStep, set()), "",
           "Read them with `videvolve.skill_library.trace.read_steps(path)` (or `iter_steps`, a stream), which gives "
           "each line as its kind's model. It reads at most the trace's byte cap and leaves out a line over "
           f"{trace.MAX_LINE_BYTES:,} bytes, one that is not JSON, and a JSON line that is no step (not an object "
           "with an `event`); a step of a kind this release does not know, or whose keys do not fit its kind "
           "(another release's), is kept as an `UnknownStep` with all its keys (the second with a warning in the "
           "log). A key a later release added is absent from an older trace's lines and reads as None. The writer "
           f"(`TraceWriter`) writes at most {trace.MAX_TRACE_BYTES:,} bytes of a task's steps (then one "
           "`trace_capped` line; what ends the task, `final` or `error`, is written all the same) and "
           f"{trace.MAX_NOTES:,} of its harness's notes (`log`, `tool`; then one `notes_capped` line), each note's "
           f"values cut to {trace.MAX_NOTE_CHARS:,} characters of their JSON.", ""]
    for kind in (*steps.KINDS, steps.CutStep):
        events = " or ".join(f"`{v}`" for v in steps.events_of(kind)) or "any `event`, with a `cut` key"
        out += [f"## {kind.__name__}: {events}", "", inspect.getdoc(kind) or "", "", *_fields(kind, common), ""]
    out += ["## Observations", "", "A model call's `observations`: what it showed, each as it was shown (the report "
            "and the editor's workspace draw them again).", ""]
    for spec in (steps.FrameSpec, steps.SheetSpec):
        out += [f"### {spec.__name__}", "", inspect.getdoc(spec) or "", "", *_fields(spec, set()), ""]
    return "\n".join(out).rstrip() + "\n"


def render() -> dict[str, str]:
    """Each generated page's text."""
    return {"cli": cli_page().rstrip() + "\n", "sdk": sdk_page(), "operators": operators_page(),
            "events": events_page(), "steps": steps_page()}


def stale() -> list[Path]:
    """The generated pages whose file differs from what the code gives now."""
    return [PAGES[k] for k, text in render().items()
            if not PAGES[k].is_file() or PAGES[k].read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    """Write the pages, or with ``--check`` say which are stale."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a page is stale")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale()
        for path in bad:
            print(f"{path} is stale: run python docs/generate.py", file=sys.stderr)
        return 1 if bad else 0
    for key, text in render().items():
        PAGES[key].parent.mkdir(parents=True, exist_ok=True)
        PAGES[key].write_text(text, encoding="utf-8")
        print(f"wrote {PAGES[key]}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    sys.exit(main())
