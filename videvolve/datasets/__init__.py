"""Datasets: the SynthWorld generator and loaders for real benchmark annotation files."""
