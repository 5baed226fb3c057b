"""Diagnoses of failed training tasks: the fixed probe procedure (offline default)."""

from videvolve.investigator.procedure import Investigator

__all__ = ["Investigator"]
