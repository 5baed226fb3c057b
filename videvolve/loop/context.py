"""Run settings (not state): models, budgets, gate thresholds, paths. Saved to ``settings.json`` with each run.

The settings are grouped: :class:`EditorSettings` (``ctx.editor``), :class:`InvestigatorSettings`
(``ctx.investigator``), :class:`GateSettings` (``ctx.gate``) and :class:`StopSettings` (``ctx.stop``); what names the
run and what every part uses stays at the top. A field's flag is its name before the grouping (``--gate-level``,
``--editor``), kept in ``json_schema_extra["flat"]``; :func:`nest` moves such flat keys (old ``settings.json`` files,
``--config`` files, keyword arguments) into their sections.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.usage import CostMeasure, CostMetric

if TYPE_CHECKING:
    from videvolve.editing.base import GateTerms
    from videvolve.search.services import AcceptanceRule


def _flat(name: str) -> dict[str, Any]:
    """The field's name before the settings were grouped: its flag and its key in a flat settings file."""
    return {"flat": name}


class EditorSettings(BaseModel):
    """Who revises the harness, what one proposal may spend, and how a candidate is checked before the gate."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["heuristic", "llm", "agent", "command"] = Field(
        "heuristic", json_schema_extra=_flat("editor"), description="heuristic works offline (it prototypes with "
        "trials); llm: one-shot revision by a model; agent: a tool-calling model in a workspace; command: an "
        "external coding agent (--editor-cmd)")
    cmd: str | None = Field(None, json_schema_extra=_flat("editor_cmd"), description="--editor command: the shell "
                            "command run in the workspace in bubblewrap, e.g. 'claude -p \"$(cat TASK.md)\" ...' "
                            "(see the docs' editors guide)")
    cmd_repair: str | None = Field(None, json_schema_extra=_flat("editor_cmd_repair"), description="the command of "
                                   "a repair round, with the failure in REPAIR.md (default: --editor-cmd)")
    cmd_timeout: float = Field(1800.0, gt=0, json_schema_extra=_flat("editor_cmd_timeout"), description="seconds "
                               "one run of --editor-cmd may take before its process tree is killed")
    cmd_ro_binds: list[str] | None = Field(None, json_schema_extra=_flat("editor_cmd_ro_binds"),
                                           description="read-only paths the command sees besides the "
                                           "system; those under your home at the same place under its HOME "
                                           "(default: ~/.claude/settings.json, ~/.claude/.credentials.json, "
                                           "~/.codex/auth.json, ~/.codex/config.toml, ~/.aider.conf.yml "
                                           "where they exist; its program's install folder is always added)")
    cmd_env: list[str] | None = Field(None, json_schema_extra=_flat("editor_cmd_env"), description="environment "
                                      "variables passed to the command (default: ANTHROPIC_*/OPENAI_* keys and "
                                      "URLs, CODEX_API_KEY, proxies, TERM, LANG)")
    max_tokens: int = Field(16384, ge=256, json_schema_extra=_flat("editor_max_tokens"), description="reply length "
                            "cap of the editor's model (an editor returns whole files; the solver's cap is "
                            "--max-tokens)")
    model: ModelSettings | None = Field(None, json_schema_extra=_flat("editor_model"), description="model of the "
                                        "llm and agent editors (default: the solver)")
    rounds: int = Field(16, ge=1, json_schema_extra=_flat("editor_rounds"), description="model turns an agent "
                        "editor gets per proposal (repairs included)")
    trial_tasks: int = Field(144, ge=0, json_schema_extra=_flat("editor_trial_tasks"), description="training-task "
                             "runs the editor's trials may make per proposal")
    probes: int = Field(8, ge=0, json_schema_extra=_flat("editor_probes"), description="perception probes the "
                        "editor may make per proposal")
    visual_tokens: int | None = Field(None, ge=0, json_schema_extra=_flat("editor_visual_tokens"), description="visual "
                                      "tokens the editor's trials and probes may spend per proposal (default: no "
                                      "cap)")
    timeout: float = Field(900.0, gt=0, allow_inf_nan=False, json_schema_extra=_flat("editor_timeout"),
                           description="wall-clock seconds of one proposal of an agent editor")
    workspace_images: int = Field(24, ge=0, description="images of what the model was shown written per training "
                                  "task into the editor's workspace")
    no_trials: bool = Field(False, description="the heuristic editor sends its first choice to the gate without "
                            "prototyping it")
    trial_operators: int = Field(3, ge=1, description="operators the heuristic editor prototypes with trials")
    trial_batch: int = Field(24, ge=1, description="training tasks of the batch each prototype trial runs on (on 8, "
                             "a trial's mean difference has a standard error near 0.16: it cannot rank moves)")
    repair_rounds: int = Field(1, ge=0, description="times a failing candidate goes back to the editor")
    smoke_tasks: int = Field(2, ge=1, description="training tasks of the validation smoke run")


class InvestigatorSettings(BaseModel):
    """Which training tasks are investigated, and how their failures are diagnosed."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["procedure", "agent"] = Field(
        "procedure", json_schema_extra=_flat("investigator"), description="procedure: the fixed probe procedure (a "
        "decision tree, offline); agent: a tool-calling model plans its probes and writes the diagnosis (the "
        "procedure's when its reply is unusable)")
    model: ModelSettings | None = Field(None, json_schema_extra=_flat("investigator_model"), description="model for "
                                        "probes (default: the solver)")
    agent_model: ModelSettings | None = Field(None, json_schema_extra=_flat("investigator_agent_model"),
                                              description="model of the agent investigator (default: the solver, as "
                                              "in Video-RSI)")
    rounds: int = Field(8, ge=1, json_schema_extra=_flat("investigator_rounds"), description="model turns (and "
                        "probes) the agent investigator gets per failure")
    max_tokens: int = Field(4096, ge=256, json_schema_extra=_flat("investigator_max_tokens"), description="reply "
                            "length cap of the agent investigator's model")
    failure_threshold: float = Field(0.5, ge=0, le=1, description="a training task with a lower score is investigated")
    probe_frames: int = Field(16, ge=1, description="the investigator's frame cap per failure")


class GateSettings(BaseModel):
    """How a candidate is judged against the incumbent on the selection set: the rule, its cost and its schedule."""

    model_config = ConfigDict(extra="forbid")

    rule: Literal["paired", "video-rsi"] = Field(
        "paired", json_schema_extra=_flat("gate"), description="paired: a gain must pass a one-sided paired test at "
        "--gate-level, a cost cut must be non-inferior within --gate-margin, no kind of question may lose "
        "significantly (see the docs' search and gate guide); video-rsi: the paper's rule, any positive difference "
        "at <= (1+alpha) C (takes noise for gains)")
    level: float = Field(0.05, gt=0, lt=0.5, json_schema_extra=_flat("gate_level"), description="the paired gate's "
                         "level: the most any decision is judged at, the run's starting alpha-wealth, and the level "
                         "every kept revision's constraints are held at (no kind losing significantly, its cost "
                         "within its bound over the selection videos)")
    margin: float = Field(0.02, ge=0, json_schema_extra=_flat("gate_margin"), description="the paired gate's "
                          "non-inferiority margin: a cost cut is kept only if the upper bound of its score loss is at "
                          "most this")
    min_videos: int = Field(8, ge=2, json_schema_extra=_flat("gate_min_videos"), description="the paired gate "
                            "asks a gain to hold over the selection videos too (a cluster-robust t, videos as units, "
                            "and a cut's loss bound the same) when they are at least this many; with fewer that test "
                            "has too few degrees of freedom to keep any but the clearest gains, and the gate judges "
                            "the questions alone (2: always)")
    spending: Literal["investing", "none"] = Field(
        "investing", json_schema_extra=_flat("gate_spending"), description="investing: each decision spends half the "
        "run's alpha-wealth (a rejection costs, an acceptance earns), so the search cannot overfit the selection set "
        "by trying many things; none: every decision at --gate-level")
    alpha: float = Field(0.1, gt=-1, description="accept a better candidate only if its cost is at most (1+alpha) C")
    beta: float = Field(0.2, ge=0, lt=1, description="accept an equal-or-slightly-worse one only if its cost is at "
                        "most (1-beta) C")
    cost_ceiling: float | None = Field(
        None, gt=0, description="a budget: a gain may cost up to this much per question (in --cost-metric's units) "
        "instead of (1+alpha) x its parent's and the seed's cost, so the search can spend more to gain more, up to "
        "the budget (for example half of a teacher's cost, to find a cheaper harness that agrees with it); cost cuts "
        "are judged as always")
    eps: float | None = Field(None, ge=0, description="--gate video-rsi: tolerated score loss; default "
                              "1/|selection set|")
    cost_metric: CostMetric = Field(
        "visual_tokens", description="C in the gate's rule: mean visual tokens per question (what a vLLM server's "
        "compute grows with), mean distinct frames (Video-RSI's definition), or visual tokens plus "
        "text_token_weight x the transcript tokens read")
    text_token_weight: float = Field(1.0, ge=0, description="weight of a transcript text token against a visual "
                                     "token in the cost with --cost-metric visual_tokens+text")
    validation: Literal["full", "multi-fidelity"] = Field(
        "multi-fidelity", description="multi-fidelity: full validation stopped early on nested rungs of the "
        "selection set (a candidate stops when the questions asked so far make full validation's verdict all but "
        "certain; see --curtail and --futility); full: every candidate on the whole set")
    rungs: list[float] = Field(default_factory=lambda: [k / 10 for k in range(1, 11)],
                               description="nested rung sizes, as fractions of the selection set (a tenth more each "
                               "rung: a candidate stops as soon as its verdict is clear, not at the next doubling)")
    penalty: float = Field(1.5, description="promotion ranks accuracy minus penalty x 0.5/sqrt(n) (worst-case "
                         "SE), and mcts backs up the same penalized score")
    curtail: float = Field(0.99, gt=0.5, le=1, description="multi-fidelity under the paired gate: accept on a "
                           "partial rung when the gate's rule passes there and the predictive chance that full "
                           "validation accepts is at least this (the questions not yet asked alike to those asked; "
                           "1: never early)")
    futility: float = Field(0.01, ge=0, lt=0.5, description="multi-fidelity under the paired gate: stop a candidate "
                            "on a partial rung when the predictive chance that full validation accepts it is below "
                            "this (0: never; each such stop of a candidate full validation would accept loses a real "
                            "gain, so it is kept small)")

    @property
    def acceptance(self) -> AcceptanceRule:
        """The acceptance rule ``rule`` names, looked up in ``search/rules.py:RULES``.

        The screening, the editor's input and terms, and evolve's first lines ask it rather than compare ``rule`` to
        a string.
        """
        from videvolve.search.rules import rule_named  # SciPy: only when asked

        return rule_named(self.rule)

    @property
    def cost_measure(self) -> CostMeasure:
        """C as the gate counts it: ``cost_metric`` with ``text_token_weight``, in one value."""
        return CostMeasure(metric=self.cost_metric, text_weight=self.text_token_weight)

    def eps_for(self, n_selection: int) -> float:
        """``--gate video-rsi``'s tolerated score loss on ``n_selection`` questions (default: one question's worth)."""
        return self.eps if self.eps is not None else 1 / max(1, n_selection)

    def terms(self, n_selection: int) -> GateTerms:
        """The rule as an editor applies it to its own trials, on a selection set of ``n_selection`` questions."""
        from videvolve.editing.base import GateTerms

        rule = self.acceptance
        return GateTerms(alpha=self.alpha, beta=self.beta, tolerance=rule.tolerance(self, n_selection),
                         ceiling=self.cost_ceiling, spends_wealth=rule.spends_wealth)

    def first_level(self) -> float:
        """The level of a run's first decision (what the power notes are computed at)."""
        from videvolve.search.spending import next_level

        return next_level([], self.level, self.spending)

    def power(self, n_selection: int, videos: int | None = None) -> tuple[str, bool]:
        """What ``n_selection`` questions (from ``videos`` videos) let this gate detect, and whether to warn."""
        from videvolve.search.significance import power_note  # scipy: only when asked

        return power_note(n_selection, self.first_level(), self.margin, videos, self.min_videos)

    def detectable_gain(self, n_selection: int, videos: int | None = None) -> float:
        """The smallest gain ``n_selection`` questions from ``videos`` videos let this gate detect (80 % power)."""
        from videvolve.search.significance import min_detectable_gain

        tested = videos if videos is not None and videos >= self.min_videos else None
        return min_detectable_gain(n_selection, self.first_level(), videos=tested)


class StopSettings(BaseModel):
    """When a run stops; the only settings ``--resume`` lets grow."""

    model_config = ConfigDict(extra="forbid")

    iterations: int = Field(6, ge=0, description="revisions to try")
    hours: float | None = Field(None, gt=0, description="stop after the run has spent this many hours running "
                                "(time it sat stopped before a --resume is not counted)")
    max_calls: int | None = Field(None, ge=1, description="stop once this many model calls were made")
    max_visual_tokens: int | None = Field(None, ge=1, description="stop once this many visual tokens were sent")


SECTIONS: dict[str, type[BaseModel]] = {"editor": EditorSettings, "investigator": InvestigatorSettings,
                                        "gate": GateSettings, "stop": StopSettings}
"""Context's grouped settings: the field of Context and the model of its section."""


def flat_keys(section: type[BaseModel]) -> dict[str, str]:
    """A section's fields by their flat names (``gate_level`` -> ``level``)."""
    out = {}
    for name, field in section.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        out[str(extra.get("flat") or name)] = name
    return out


def nest(data: Mapping[str, Any]) -> dict[str, Any]:
    """Settings with their flat keys moved into their sections; nested settings pass unchanged.

    Flat keys come from a ``settings.json`` written before the grouping, a flat ``--config`` or keyword arguments
    (``gate_level=0.1``, ``editor="llm"``); a flat key wins over its nested twin.
    """
    out = dict(data)
    for section, model in SECTIONS.items():
        current = out.get(section)
        if isinstance(current, BaseModel):
            current = current.model_dump(exclude_unset=True)
        inner = dict(current) if isinstance(current, Mapping) else {}
        for flat, name in flat_keys(model).items():
            if flat == section:  # "editor": "llm", "gate": "paired" name the section's kind
                if current is not None and not isinstance(current, Mapping):
                    inner[name] = current
            elif flat in out:
                inner[name] = out.pop(flat)
        if inner or section in out:
            out[section] = inner
    return out


def _section(model: type[BaseModel], description: str) -> Any:
    return Field(default_factory=model, description=description, json_schema_extra={"section": True})


class Context(BaseModel):
    """Everything a run needs to know that is not its state; a run's ``settings.json`` is a valid ``--config``."""

    model_config = ConfigDict(extra="forbid")

    run_dir: str = Field(description="the run directory")
    run_id: str = Field(description="the run's name; also the checkpointer's thread id")
    tasks: str = Field(description="tasks file with train and selection splits (test is never loaded)")
    seed_harness: str = Field("uniform", description="seed name or harness directory to start from")
    memory: str = Field(str(Path.home() / ".videvolve" / "memory"), description="diagnosis memory shared by runs")
    model: ModelSettings = Field(default_factory=ModelSettings, description="the frozen solver model")
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    batch: int = Field(24, ge=1, description="training tasks solved and investigated per iteration (the heuristic "
                       "editor's trials run on them)")
    seed: int = Field(0, description="drives batch sampling")
    embedder: Literal["auto", "minilm", "hashing"] = Field("auto", description="memory embedder")
    cache: str | None = Field(None, description="response cache file (default ~/.cache/videvolve)")
    no_cache: bool = Field(False, description="do not read or write the response cache (every reply is paid for)")
    proxy: Literal["never", "auto", "always"] = Field("never", description="read frames from proxies of slow sources")
    budgets: list[int] = Field(default_factory=list, description="frame-budget tiers of the final mixture of harnesses")
    search: Literal["chain", "mcts"] = Field("chain", description="chain: revise the incumbent (Video-RSI); mcts: "
                                             "a tree of versions, expanded by UCT (VidHarness)")
    children: int | None = Field(None, ge=1, description="candidates the editor proposes each iteration, screened "
                                 "together at the gate (default: 1 in chain search, 3 in mcts)")
    uct_c: float = Field(0.5, description="exploration weight of UCT")
    executor: Literal["local", "ray"] = Field("local", description="where (harness, task) evaluations run")
    ray_address: str | None = Field(None, description="an existing Ray cluster (default: start one locally)")
    editor: EditorSettings = _section(EditorSettings, "who revises the harness and what a proposal may spend")
    investigator: InvestigatorSettings = _section(InvestigatorSettings, "which failures are diagnosed, and how")
    gate: GateSettings = _section(GateSettings, "how a candidate is judged on the selection set")
    stop: StopSettings = _section(StopSettings, "when the run stops (these may grow on --resume)")

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_keys(cls, data: Any) -> Any:
        """Flat settings (a run from before the grouping, ``Context(gate_level=0.1, ...)``) into their sections."""
        return nest(data) if isinstance(data, Mapping) else data

    @property
    def candidates_per_iteration(self) -> int:
        """How many candidates the editor is asked for each iteration (``children``, or the search's default)."""
        return self.children or (3 if self.search == "mcts" else 1)

    @property
    def root(self) -> Path:
        """The run directory as a path."""
        return Path(self.run_dir)

    def needs_a_real_model(self, editor_given: bool = False) -> str | None:
        """Why an editor or investigator of these settings cannot work on SimVLM, with the fix; or None.

        SimVLM answers SynthWorld questions only: it writes no revision (the llm editor) and calls no tool (the agent
        editor and investigator), so a run with one of them on it would spend its iterations for nothing.
        ``editor_given``: the run's editor is given (``open_run(editor=...)``), not built from these settings.
        """
        real = "--backend openai --base-url URL (and --model) for the whole run"
        editor = self.editor.model or self.model
        if self.editor.kind in ("llm", "agent") and editor.backend == "sim" and not editor_given:
            does = "writes no revision of a harness" if self.editor.kind == "llm" else "calls no tool"
            return (f"--editor {self.editor.kind} needs a model that edits code, and SimVLM (the sim backend) "
                    f"understands only SynthWorld questions: it {does}. Give the editor a real model with "
                    f"--editor-model NAME --editor-base-url URL, or {real}; or use --editor heuristic")
        if self.investigator.kind == "agent" and (self.investigator.agent_model or self.model).backend == "sim":
            return ("--investigator agent needs a model that calls tools, and SimVLM (the sim backend) calls none: "
                    "give the investigator a real model with --investigator-agent-model NAME "
                    f"--investigator-agent-base-url URL, or {real}; or use --investigator procedure")
        return None
