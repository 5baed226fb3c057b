"""Editors: propose harness revisions from diagnoses (heuristic offline, an LLM, or a tool-calling agent)."""

from videvolve.editing.base import Editor, EditorInput, PastDiagnosis, Proposal, read_files, write_candidate
from videvolve.editing.heuristic import HeuristicEditor
from videvolve.editing.llm import HarnessRevision, LLMEditor

__all__ = ["Editor", "EditorInput", "HarnessRevision", "HeuristicEditor", "LLMEditor", "PastDiagnosis", "Proposal",
           "read_files", "write_candidate"]
