"""SimVLM: the offline stand-in for a vision-language model. It perceives only the pixels it is sent."""

from videvolve.models.sim.perception import Percept, perceive
from videvolve.models.sim.vlm import SimVLM

__all__ = ["Percept", "SimVLM", "perceive"]
