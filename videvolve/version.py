"""The release, on its own so that any layer may name it (result keys hold it; ``videvolve.__version__`` is it)."""

__version__ = "0.1.0"
