"""Editors: propose harness revisions from diagnoses (heuristic offline, or an LLM)."""

from videvolve.editing.base import Editor, EditorInput, PastDiagnosis, Proposal, read_files, write_candidate
from videvolve.editing.heuristic import HeuristicEditor
from videvolve.editing.llm import HarnessRevision, LLMEditor

__all__ = ["Editor", "EditorInput", "HarnessRevision", "HeuristicEditor", "LLMEditor", "PastDiagnosis", "Proposal",
           "read_files", "write_candidate"]
