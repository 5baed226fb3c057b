"""SimVLM: the offline stand-in for a vision-language model. It perceives only the pixels it is sent."""

from videvolve.models.sim.perception import Percept, perceive

__all__ = ["Percept", "perceive"]
