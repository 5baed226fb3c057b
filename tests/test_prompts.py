"""Prompts are rendered from template files and the code they describe: they cannot drift from it."""

from __future__ import annotations

import inspect
import re
from importlib import resources

from videvolve.editing import agent, llm
from videvolve.editing.taskdoc import allowed_imports, sdk_reference
from videvolve.editing.tools import TOOLS
from videvolve.skill_library import sdk
from videvolve.skill_library.bootstrap import ALLOWED_MODULES
from videvolve.skill_library.static_check import FORBIDDEN_NAMES


def _ctx_methods() -> list[str]:
    return [n for n, _ in inspect.getmembers(sdk.HarnessContext, inspect.isfunction) if not n.startswith("_")]


def test_the_llm_editors_prompt_names_every_allowed_import_and_every_ctx_member() -> None:
    prompt = llm.SYSTEM
    allowed = prompt.split("may import only", 1)[1].split("\n", 1)[0]
    assert all(re.search(rf"\b{re.escape(m)}\b", allowed) for m in ALLOWED_MODULES), allowed
    assert len(ALLOWED_MODULES) > 9  # more than the nine the hand-written prompt named
    for name in _ctx_methods():
        assert f"ctx.{name}(" in prompt, name
    for name in ("transcript", "search_transcript", "ocr", "usage", "call_tool"):
        assert f"ctx.{name}(" in prompt  # the ones the hand-written prompt left out
    assert "ctx.config" in prompt and "ctx.tools" in prompt and "ctx.budget" in prompt
    assert all(n in prompt for n in ("getattr", "hasattr", "type", "vars")) and \
        {"getattr", "hasattr", "type", "vars"} <= FORBIDDEN_NAMES
    for field in llm.HarnessRevision.model_fields:
        assert f'"{field}"' in prompt
    assert llm.parse_revision('{"rationale": "r", "applies_when": "a", "preserve": "p", "edits": '
                              '[{"path": "solver.py", "content": "x"}]}').edits[0].path == "solver.py"


def test_the_agent_editors_prompt_names_its_tools_and_task_md_the_sdk() -> None:
    for name in TOOLS:
        assert name in agent.SYSTEM
    reference = sdk_reference()
    for name in _ctx_methods():
        assert f"- `{name}(" in reference, name
    assert "videvolve_sdk" in allowed_imports() and allowed_imports().count("videvolve_sdk") == 1


def test_prompts_are_template_files_and_say_nothing_the_code_owns() -> None:
    folder = resources.files("videvolve.editing") / "prompts"
    templates = {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir() if p.name.endswith(".j2")}
    assert {"llm_system.md.j2", "agent_system.md.j2", "task.md.j2"} <= set(templates)
    for text in templates.values():  # the SDK's methods and the allowlist come from the code, never the template
        assert not any(f"ctx.{name}(" in text for name in _ctx_methods())
        assert "import only math" not in text and "statistics" not in text
    assert llm.system_prompt() == llm.SYSTEM
