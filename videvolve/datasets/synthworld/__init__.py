"""SynthWorld: seeded long videos of coloured glyphs on coloured backgrounds, with questions of both kinds.

Perception here is real pixel work: a glyph may be on screen for one second, and a small glyph in a coarse contact
sheet cannot be read. The truth lives only in ``tasks.jsonl``; video files carry no label, seed or event marker.
"""

from videvolve.datasets.synthworld.world import DEFAULT_FRACTIONS, World, generate_world, plan_world, world_stats

__all__ = ["DEFAULT_FRACTIONS", "World", "generate_world", "plan_world", "world_stats"]
