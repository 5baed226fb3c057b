"""How long the CLI takes to answer ``--help`` (target: under 1 s), beside a bare interpreter and a full import.

``python bench/startup.py`` runs each command 5 times and prints the median wall time. The CLI imports lazily:
``videvolve --help`` and ``videvolve evolve --help`` load the settings, not LangGraph, the graph or the nodes.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass (the interpreter alone)": [sys.executable, "-c", "pass"],
    "videvolve --help": [sys.executable, "-m", "videvolve", "--help"],
    "videvolve evolve --help": [sys.executable, "-m", "videvolve", "evolve", "--help"],
    "import everything (graph, nodes, LangGraph, Chroma)": [
        sys.executable, "-c", "import videvolve.graph.builder, videvolve.graph.driver, videvolve.memory.store, "
                              "videvolve.evaluation.evaluate"],
}


def median_seconds(cmd: list[str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    results = {name: median_seconds(cmd) for name, cmd in COMMANDS.items()}
    base = results["python -c pass (the interpreter alone)"]
    print(f"{'command':55s} {'median s':>9s} {'x interpreter':>14s}")
    for name, s in results.items():
        print(f"{name:55s} {s:9.2f} {s / base:14.1f}")
    slow = [n for n in ("videvolve --help", "videvolve evolve --help") if results[n] >= 1.0]
    print("target (< 1 s):", "met" if not slow else f"missed by {', '.join(slow)}")


if __name__ == "__main__":
    main()
