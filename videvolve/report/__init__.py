"""The run report: an HTML page (Jinja2) with PNG plots (matplotlib) and a trace viewer."""

from videvolve.report.build import build_report

__all__ = ["build_report"]
