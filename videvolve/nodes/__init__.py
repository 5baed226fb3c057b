"""The loop's nodes: one module per verb, each a function returning a partial state update."""

from videvolve.nodes.edit import edit
from videvolve.nodes.gate import gate
from videvolve.nodes.investigate import investigate
from videvolve.nodes.prepare import prepare
from videvolve.nodes.record import record
from videvolve.nodes.solve import solve
from videvolve.nodes.validate import validate

__all__ = ["edit", "gate", "investigate", "prepare", "record", "solve", "validate"]
