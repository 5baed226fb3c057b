"""videvolve: a self-improving agent for long-video understanding."""

__version__ = "0.1.0"
