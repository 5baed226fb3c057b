"""Fakes of the models and of a run, for tests (one place: smolagents' and dspy's habit).

Scripted replies and chats, a SimVLM that counts its calls or answers nothing usable, an editor that proposes
scripted revisions, one workspace for an editor tested alone, and :class:`FakeRun`: a run whose versions have fixed
per-question scores, for the search's screening and gate.
"""

from __future__ import annotations

from typing import Any, ClassVar

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage

from videvolve.editing.base import Editor, EditorInput, Proposal, Workspaces
from videvolve.editing.tools import EditorTools
from videvolve.evaluation.results import TaskResult
from videvolve.models.base import Reply
from videvolve.models.sim import SimVLM
from videvolve.search.services import SearchSettings, StoredResults
from videvolve.tasks import Task


class ScriptedReplies:
    """A VLM whose replies are scripted texts, in order (``"{}"`` once they run out); records every request."""

    name, revision = "scripted", "1"

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.requests: list[list[dict[str, Any]]] = []

    def decoding(self) -> dict[str, Any]:
        """No decoding settings (nothing to key a cache on)."""
        return {}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        """The next scripted reply."""
        self.requests.append(messages)
        return Reply(text=self.replies.pop(0) if self.replies else "{}")


class CountingVLM(SimVLM):
    """SimVLM that counts its calls (class-wide, so copies made by a run count too)."""

    calls = 0

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        """SimVLM's reply, counted."""
        type(self).calls += 1
        return super().complete(messages, tools)


class GarbageVLM(SimVLM):
    """SimVLM that looks at everything and then answers nothing usable (a parse error every time)."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        """An unusable reply."""
        reply = super().complete(messages, tools)
        reply.text = "Hmm, hard to say."
        return reply


class ScriptedChat(GenericFakeChatModel):
    """A langchain chat model that returns scripted ``AIMessage``s (tool calls included); records every request.

    ``GenericFakeChatModel.bind_tools`` raises, so this one returns itself and records the tools it was given.
    """

    seen: ClassVar[list[list[BaseMessage]]] = []
    tools_seen: ClassVar[list[Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        """Record the tools; tool calls come from the script."""
        type(self).tools_seen.append(tools)
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        type(self).seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def tool_call(name: str, i: int, **args: Any) -> AIMessage:
    """An assistant message calling one tool (id ``c<i>``)."""
    return AIMessage(content="", tool_calls=[{"id": f"c{i}", "name": name, "args": args}])


class ScriptedEditor:
    """An editor that proposes the scripted revisions in order, then nothing."""

    def __init__(self, proposals: list[Proposal]) -> None:
        self.proposals = list(proposals)
        self.last_failure: str | None = None

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        """The next scripted proposal."""
        return self.proposals.pop(0) if self.proposals else None


class OneWorkspace:
    """Workspaces that hand out the same tools every time (an editor tested on its own, outside the edit node)."""

    def __init__(self, tools: EditorTools) -> None:
        self.tools = tools

    def open(self, inp: EditorInput, resume: bool = False) -> EditorTools:
        """The one workspace's tools."""
        return self.tools


def _satisfies(editor: ScriptedEditor, one: OneWorkspace) -> tuple[Editor, Workspaces]:  # mypy checks the protocols
    return editor, one


class FakeRun:
    """A run whose versions have fixed per-question scores on ``len(scores[v])`` mcq selection tasks.

    ``frames``: every version's frames per question (its cost), or each version's (a number, or one per question);
    ``evidence``: each question's evidence type (the gate guards each type apart, as on a speaking world);
    ``videos``: how many videos the questions come from, question i from video i mod ``videos`` (default: each its own).

    It counts every (version, task) evaluation, as a real run would pay for it; mypy checks it satisfies the
    search's :class:`~videvolve.search.services.StoredResults`.
    """

    def __init__(self, ctx: SearchSettings, scores: dict[str, list[float]],
                 frames: int | dict[str, int | list[int]] = 16,
                 evidence: list[str] | None = None, videos: int | None = None) -> None:
        self.ctx, self.scores, self.frames = ctx, scores, frames
        n = len(next(iter(scores.values())))
        self.selection = [Task(id=f"t{i}", video_id=f"v{i % videos if videos else i}", video="v.mp4", kind="mcq",
                               question="q", options=["a", "b"], answer="A", duration=10,
                               meta={"evidence": evidence[i]} if evidence else {}) for i in range(n)]
        self.evaluated: dict[str, set[str]] = {}

    def evaluate(self, version: str, tasks: list[Task], split: str) -> list[TaskResult]:
        """Scripted results, counted."""
        self.evaluated.setdefault(version, set()).update(t.id for t in tasks)
        return [self._result(version, t) for t in tasks]

    def stored(self, version: str, task: Task, split: str) -> TaskResult | None:
        """The scripted result of a (version, task) already evaluated, without counting it; None otherwise."""
        return self._result(version, task) if task.id in self.evaluated.get(version, set()) else None

    def _result(self, version: str, task: Task) -> TaskResult:
        own = self.frames if isinstance(self.frames, int) else self.frames.get(version, 16)
        frames = own if isinstance(own, int) else own[int(task.id[1:])]
        return TaskResult(task_id=task.id, harness_id=version, kind="mcq", outcome="ok",
                          score=self.scores[version][int(task.id[1:])],
                          usage={"frames": frames, "image_tokens": frames})


def _fake_run_is_an_evaluator(run: FakeRun) -> StoredResults:  # mypy checks the fake against the protocol
    return run
