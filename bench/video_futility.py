"""Would a futility stop on the predicted test over videos lose real gains? Simulated decisions, counted.

``python bench/video_futility.py [--draws 300] [--seeds 1 2] [--moments]``: each draw is one decision on 8
selection videos of about 38 questions (a gain drawn from 0 to 0.12, spread unevenly over the videos, a share of
questions changed from 0.1 to 0.5), read in a random order on rungs of 10 %. A candidate stops at the first rung
where the question-level predictive chance (``curtailment.outlook``) or the predicted test over videos
(``curtailment.video_chance``) is below ``--futility``; the script counts how many gains full validation accepts
(the sign-flip test and the test over videos on all questions) each rule would have stopped. Then early acceptance
as the gate does it (the rung passes both tests and both predictive chances are >= ``--curtail``; gains drawn up to
0.2): how many it accepts that full validation turns down. ``--moments``: the chance over videos as it was until
2026-12-06, the spreads between and within videos taken at their moment estimates (now drawn from their
posteriors: scaled inverse chi-square).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from videvolve.search.curtailment import outlook, video_chance
from videvolve.search.significance import sign_flip_p, video_t

VIDEOS, PER_VIDEO, LEVEL = 8, 38, 0.025


def decision(rng: np.random.Generator, top: float) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """One candidate's paired differences with their videos, in the order a run reads them."""
    mu, tau, change = rng.uniform(0.0, top), rng.choice([0.0, 0.05, 0.1, 0.2]), rng.uniform(0.1, 0.5)
    sizes = {f"v{g}": int(PER_VIDEO + rng.integers(-8, 9)) for g in range(VIDEOS)}
    d, vids = [], []
    for v, m in sizes.items():
        gain = float(np.clip(mu + tau * rng.standard_normal(), -0.45, 0.45))
        for _ in range(m):
            d.append((1.0 if rng.random() < 0.5 + gain / (2 * change) else -1.0) if rng.random() < change else 0.0)
            vids.append(v)
    order = rng.permutation(len(d))
    return np.asarray(d)[order], np.asarray(vids)[order], sizes


def full_accepts(d: np.ndarray, vids: np.ndarray) -> bool:
    """Full validation's verdict on all questions: the sign-flip test and the test over videos."""
    over = video_t(list(d), list(vids), LEVEL)
    return sign_flip_p(list(d)) <= LEVEL and over is not None and over.p_gain <= LEVEL


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--futility", type=float, default=0.01)
    parser.add_argument("--curtail", type=float, default=0.99)
    parser.add_argument("--moments", action="store_true", help="the chance over videos as it was until 2026-12-06")
    args = parser.parse_args()
    spreads = "moments" if args.moments else "posterior"

    def chance(x: list[float], vv: list[str], sizes: dict[str, int], level: float) -> float:
        return video_chance(x, vv, sizes, level, spreads=spreads)

    accepted = stopped_q = stopped_v = early = early_wrong = 0
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        for _ in range(args.draws):
            d, vids, sizes = decision(rng, 0.12)
            n_all = len(d)
            full = full_accepts(d, vids)
            accepted += full
            for k in range(1, 10):
                n = math.ceil(k / 10 * n_all)
                x, vv = list(d[:n]), list(vids[:n])
                if outlook(x, n_all, LEVEL).predictive < args.futility:
                    stopped_q += full
                    break
                if chance(x, vv, sizes, LEVEL) < args.futility:
                    stopped_v += full
                    break
            d, vids, sizes = decision(rng, 0.2)
            full = full_accepts(d, vids)
            for k in range(1, 10):
                n = math.ceil(k / 10 * len(d))
                x, vv = list(d[:n]), list(vids[:n])
                over = video_t(x, vv, LEVEL)
                if not (sign_flip_p(x) <= LEVEL and over is not None and over.p_gain <= LEVEL):
                    continue
                if outlook(x, len(d), LEVEL).predictive >= args.curtail and chance(x, vv, sizes, LEVEL) >= args.curtail:
                    early += 1
                    early_wrong += not full
                    break
    print(f"{accepted} gains full validation accepts: the question-level futility stop would stop {stopped_q}, the "
          f"one over videos {stopped_v} more ({spreads} spreads); early "
          f"acceptance: {early} accepted early, {early_wrong} of them turned down by full validation")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
