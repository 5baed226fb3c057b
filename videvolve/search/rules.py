"""The gate's rules as strategies: one class per value of ``--gate``, registered by its name in :data:`RULES`.

Each satisfies :class:`~videvolve.search.services.AcceptanceRule`: its verdict on given results, what a partial rung
of multi-fidelity screening may settle, the score a cost cut may lose, its words for the editor and evolve's first
lines. ``GateSettings.acceptance`` looks up the run's rule here once; the screening
(:func:`~videvolve.search.screening.screen`), the editor's input and terms, and ``evolve`` ask it, never its name.
A new rule is a class and an entry of :data:`RULES` (and its name among ``GateSettings.rule``'s choices, which give
the ``--gate`` flag's).
"""

from __future__ import annotations

from videvolve.search.gate import Decision, gate_rule, paired_rule, paired_text, rsi_text
from videvolve.search.partial_rungs import cannot_pass, curtailed, futile
from videvolve.search.services import AcceptanceRule, Announcement, GateRules, Look

__all__ = ["RULES", "PairedRule", "VideoRsiRule", "rule_named"]


class PairedRule:
    """``--gate paired`` (the default): :func:`~videvolve.search.gate.paired_rule`.

    A paired one-sided sign-flip test at an alpha-invested level, a cost cut non-inferior within the margin, no kind
    of question losing significantly.

    Sequential: a partial rung accepts early when full validation would all but surely accept
    (:func:`~videvolve.search.partial_rungs.curtailed`) and stops a candidate it would all but surely turn down
    (:func:`~videvolve.search.partial_rungs.futile`).
    """

    name = "paired"
    spends_wealth = True
    seed_bound = True
    sequential = True

    def decide(self, look: Look) -> tuple[Decision, dict[str, float | None]]:
        """:func:`~videvolve.search.gate.paired_rule` on the rung, with its p-values and loss bound."""
        gate = look.gate
        if look.level is None:
            raise ValueError("the paired rule judges at a level: the screening gives one to rules that spend wealth")
        verdict = paired_rule(look.tasks, look.parent, look.candidate, look.level, gate.cost_measure, gate.alpha,
                              gate.beta, gate.margin, look.run_seed, look.seed, gate.cost_ceiling,
                              over_videos=look.by_video, stated_level=gate.level)
        st = verdict.stats
        extra: dict[str, float | None] = {"p_gain": st.p_gain, "p_videos": st.over_videos.p_gain if st.over_videos
                                          else None, "bound": st.lower_gate} if st else {}
        return verdict, extra

    def accept_early(self, look: Look) -> str | None:
        """Curtailment: :func:`~videvolve.search.partial_rungs.curtailed`."""
        return curtailed(look)

    def stop_early(self, look: Look) -> tuple[str, bool] | None:
        """Futility: :func:`~videvolve.search.partial_rungs.futile`."""
        return futile(look)

    def tolerance(self, gate: GateRules, n_selection: int) -> float:
        """The non-inferiority margin (``--gate-margin``)."""
        return gate.margin

    def text(self, gate: GateRules, n_selection: int) -> str:
        """:func:`~videvolve.search.gate.paired_text` with the run's numbers."""
        return paired_text(gate.alpha, gate.beta, gate.cost_measure, gate.level, gate.margin, gate.cost_ceiling)

    def announce(self, gate: GateRules, n_selection: int, videos: int | None) -> list[Announcement]:
        """Its level and spending, what the selection set lets it detect (a warning when coarse), its ceiling."""
        note, warn = gate.power(n_selection, videos)
        head = f"paired, level <= {gate.level:g} ({gate.spending}); "
        lines = [Announcement(head, note) if warn else Announcement(head + note)]
        if gate.cost_ceiling is not None:
            lines.append(Announcement(f"a gain may cost up to the ceiling of {gate.cost_ceiling:g} "
                                      f"{gate.cost_measure.label} per question (--cost-ceiling), whatever its "
                                      "parent's and the seed's cost"))
        return lines


class VideoRsiRule:
    """``--gate video-rsi``, the paper's rule: :func:`~videvolve.search.gate.gate_rule`.

    Any gain in mean score at <= (1 + alpha) C, or a cost cut to (1 - beta) C losing at most eps.

    Not sequential: only the full rung decides; a partial rung stops a candidate whose optimistic paired difference
    cannot pass (:func:`~videvolve.search.partial_rungs.cannot_pass`).
    """

    name = "video-rsi"
    spends_wealth = False
    seed_bound = False
    sequential = False

    def decide(self, look: Look) -> tuple[Decision, dict[str, float | None]]:
        """:func:`~videvolve.search.gate.gate_rule` on the means, eps as ``GateSettings.eps_for`` gives it."""
        gate = look.gate
        eps = gate.eps_for(len(look.selection))
        return gate_rule(look.a, look.c, look.a2, look.c2, gate.alpha, gate.beta, eps, gate.cost_ceiling), {}

    def accept_early(self, look: Look) -> str | None:
        """Never: the full rung decides."""
        return None

    def stop_early(self, look: Look) -> tuple[str, bool] | None:
        """:func:`~videvolve.search.partial_rungs.cannot_pass` (the candidate's answers were compared: not on cost)."""
        why = cannot_pass(look)
        return None if why is None else (why, False)

    def tolerance(self, gate: GateRules, n_selection: int) -> float:
        """The tolerated loss eps (``--eps``; by default one question's worth)."""
        return gate.eps_for(n_selection)

    def text(self, gate: GateRules, n_selection: int) -> str:
        """:func:`~videvolve.search.gate.rsi_text` with the run's numbers."""
        return rsi_text(gate.alpha, gate.beta, gate.eps_for(n_selection), gate.cost_measure, gate.cost_ceiling)

    def announce(self, gate: GateRules, n_selection: int, videos: int | None) -> list[Announcement]:
        """The rule, and that it takes noise for gains."""
        eps = gate.eps_for(n_selection)
        bound = f"<= {gate.cost_ceiling:g}" if gate.cost_ceiling is not None else f"<= (1+{gate.alpha}) C"
        return [Announcement(f"video-rsi (any gain at {bound}; cost cuts within eps {eps:.3f}): it takes noise for "
                             "gains; --gate paired tells them apart")]


RULES: dict[str, AcceptanceRule] = {rule.name: rule for rule in (PairedRule(), VideoRsiRule())}
"""Every rule by its name (``GateSettings.rule``, the ``--gate`` flag)."""


def rule_named(name: str) -> AcceptanceRule:
    """The rule ``name`` (a value of ``GateSettings.rule``) names."""
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"no gate rule is named {name!r} (known: {', '.join(RULES)})") from None
