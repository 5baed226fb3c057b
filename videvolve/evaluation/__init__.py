"""Evaluation: run a harness on tasks (threads or Ray), keep each result on disk, summarise, compare on test."""
