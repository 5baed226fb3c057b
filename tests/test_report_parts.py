"""The report's pieces without a run: the lineage tree's layout, rounded answers, the plot's axis and legend."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from videvolve.report import plots
from videvolve.report.traces import _readable, rounded


def test_rejected_siblings_are_siblings_not_a_chain() -> None:
    versions = [{"version": "s", "parent": None, "decision": "seed", "iteration": 0}] + [
        {"version": f"c{i}", "parent": "s", "decision": "rejected", "iteration": i} for i in range(4)]
    rows = plots._tree_rows(versions)
    assert sorted(rows[f"c{i}"] for i in range(4)) == [0, 1, 2, 3]
    assert rows["s"] == 1.5  # the parent centred on its four children


def test_the_lineage_axis_runs_to_the_last_iteration_and_the_legend_names_what_occurs(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    seen = {}
    real_close = plt.close

    def keep(fig) -> None:
        ax = fig.axes[0]
        seen["ticks"] = [int(t) for t in ax.get_xticks()]
        seen["legend"] = [t.get_text() for t in ax.get_legend().get_texts()]
        real_close(fig)

    monkeypatch.setattr(plots.plt, "close", keep)
    versions = [{"version": "s", "parent": None, "decision": "seed", "iteration": 0},
                {"version": "a", "parent": "s", "decision": "accepted", "iteration": 0},
                {"version": "b", "parent": "a", "decision": "rejected", "iteration": 3}]
    plots.lineage(versions, tmp_path / "l.png", iterations=6)
    assert seen["ticks"] == [0, 1, 2, 3, 4, 5, 6] and sorted(seen["legend"]) == ["accepted", "rejected", "seed"]


@pytest.mark.parametrize("logged", [
    "{'answer': '[]', 'evidence_times': [5.8984375, 17.6953125]}",
    '{"answer": "[]", "evidence_times": [5.8984375, 17.6953125]}'])
def test_evidence_times_are_shown_to_two_decimals(logged: str) -> None:
    assert _readable(logged) == '{"answer": "[]", "evidence_times": [5.9, 17.7]}'
    assert rounded([[1.23456, 2.0]]) == [[1.23, 2.0]]
