"""Evolving on a folder of videos without labels: needles, perceived tasks and teacher labels."""
