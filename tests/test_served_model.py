"""A server's model not named with ``--model``: the one its endpoint serves, or a clear stop (never an empty name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi import FastAPI

from videvolve.cli import build_parser
from videvolve.cli.common import model_settings
from videvolve.cli.evolve_cmd import build_context
from videvolve.doctor import run_checks
from videvolve.errors import UsageError
from videvolve.models.sim.mimic import MimicSettings
from videvolve.models.sim.server import create_app
from videvolve.serving.lmms_eval_model import agent_from_args
from videvolve.testing import reserved_port, serve_app


def two_models() -> FastAPI:
    """An endpoint that lists two models (a router before several vLLMs does)."""
    app = FastAPI()

    @app.get("/v1/models")
    def models() -> dict[str, object]:
        return {"object": "list", "data": [{"id": "big", "object": "model"}, {"id": "small", "object": "model"}]}

    return app


def ask_args(base: str, *extra: str):
    return build_parser().parse_args(["ask", "v.mp4", "When?", "--backend", "openai", "--base-url", base, *extra])


def test_the_one_served_model_is_used_and_asked_once():
    with serve_app(create_app("served-name", mimic=MimicSettings())) as base:
        args = ask_args(base)
        assert model_settings(args).model == "served-name"
        assert agent_from_args("uniform", base_url=base, no_cache=True).model.model == "served-name"  # lmms-eval
    assert model_settings(args).model == "served-name"  # kept in args: the server, now stopped, is not asked again
    assert model_settings(ask_args(base, "--model", "mine")).model == "mine"  # a name given is never checked here


def test_several_models_none_or_no_answer_stop_with_what_to_pass():
    with serve_app(two_models()) as base, pytest.raises(UsageError, match=r"serves big, small: pass --model NAME"):
        model_settings(ask_args(base))
    with serve_app(create_app("m", mimic=MimicSettings(), api_key="right")) as base, \
            pytest.raises(UsageError, match=r"refuses our API key \(401\): put the server's --api-key in"):
        model_settings(ask_args(base))
    with reserved_port() as port, pytest.raises(UsageError, match=r"could not be asked .* pass --model NAME"):
        model_settings(ask_args(f"http://127.0.0.1:{port}/v1", "--timeout", "2"))


def test_evolve_keeps_the_configs_model_and_stores_the_one_found(tmp_path: Path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("")
    config = tmp_path / "run.toml"
    config.write_text('[model]\nmodel = "from-config"\n')
    with serve_app(create_app("served-name", mimic=MimicSettings())) as base:
        common = ["evolve", "--tasks", str(tasks), "--backend", "openai", "--base-url", base]
        configured = build_context(build_parser().parse_args([*common, "--run", str(tmp_path / "a"),
                                                              "--config", str(config)]))
        found = build_context(build_parser().parse_args([*common, "--run", str(tmp_path / "b")]))
    assert configured.model.model == "from-config"  # the flags' backend and URL over the config's, not its model
    assert found.model.model == "served-name" and found.model.base_url == base
    assert json.loads(found.model.model_dump_json())["model"] == "served-name"


def test_doctor_names_the_one_served_and_asks_for_one_of_several():
    with serve_app(create_app("served-name", mimic=MimicSettings())) as base:
        checks = {c.name: c for c in run_checks(model_settings(ask_args(base), ask_endpoint=False))}
    assert checks["model name"].status == "ok" and "served-name (the one served" in checks["model name"].detail
    assert checks["chat"].status == "ok"
    with serve_app(two_models()) as base:
        checks = {c.name: c for c in run_checks(model_settings(ask_args(base), ask_endpoint=False))}
    assert checks["model name"].status == "fail" and "pass --model with one of ['big', 'small']" in \
        checks["model name"].detail


def listing(*entries: object) -> FastAPI:
    """An endpoint (a proxy) whose ``/v1/models`` lists ``entries`` as its ``data``, whatever their shape."""
    app = FastAPI()

    @app.get("/v1/models")
    def models() -> dict[str, object]:
        return {"object": "list", "data": list(entries)}

    return app


def test_a_blank_or_repeated_id_is_no_model_name():
    with serve_app(listing({"id": ""}, {"id": "  "})) as base, pytest.raises(UsageError, match="lists no model"):
        model_settings(ask_args(base))
    with serve_app(listing({"id": "m"}, {"id": "m"}, {"id": ""}, "junk", {"id": 3})) as base:
        assert model_settings(ask_args(base)).model == "m"  # a proxy listing one model twice serves one


def test_doctor_reads_a_listing_of_odd_shapes_as_the_commands_do():
    with serve_app(listing("junk", {"id": ""}, {"id": None})) as base:
        checks = {c.name: c for c in run_checks(model_settings(ask_args(base), ask_endpoint=False))}
    assert checks["model name"].status == "fail" and "serves 0 models" in checks["model name"].detail
    assert "chat" not in checks  # nothing sent under an empty name


def test_an_editor_on_its_own_endpoint_is_its_model_when_the_solvers_was_found(tmp_path: Path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("")
    with serve_app(create_app("solver-vlm", mimic=MimicSettings())) as solver, \
            serve_app(create_app("editor-llm", mimic=MimicSettings())) as editor:
        common = ["evolve", "--tasks", str(tasks), "--backend", "openai", "--base-url", solver]
        found = build_context(build_parser().parse_args([*common, "--run", str(tmp_path / "a"),
                                                         "--editor-base-url", editor,
                                                         "--investigator-agent-base-url", editor]))
        named = build_context(build_parser().parse_args([*common, "--run", str(tmp_path / "b"), "--model", "x",
                                                         "--editor-base-url", editor]))
    assert found.model.model == "solver-vlm"
    assert found.editor.model is not None and found.editor.model.model == "editor-llm"
    assert found.investigator.agent_model is not None and found.investigator.agent_model.model == "editor-llm"
    assert named.editor.model is not None and named.editor.model.model == "x"  # a name given: the solver's, as ever


def test_doctor_names_the_key_on_a_403_as_on_a_401():
    """A proxy before the server that answers 403 to a wrong key (main: "did not answer", and a start-the-server
    hint)."""
    from fastapi.responses import JSONResponse

    app = FastAPI()

    @app.get("/v1/models")
    def models() -> JSONResponse:
        return JSONResponse({"error": "Forbidden"}, status_code=403)

    with serve_app(app) as base:
        checks = {c.name: c for c in run_checks(model_settings(ask_args(base, "--model", "m"), ask_endpoint=False))}
    assert checks["endpoint"].status == "fail" and "refuses our API key (403)" in checks["endpoint"].detail


def test_a_run_stored_without_a_model_name_resumes_under_the_one_served(tmp_path: Path, capsys):
    """Runs started before the served model was looked up stored ``model: ""``; a resume never sends it again."""
    from videvolve.rundir import RunDir

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("")
    run = tmp_path / "old"
    with serve_app(create_app("served-name", mimic=MimicSettings())) as base:
        ctx = build_context(build_parser().parse_args(["evolve", "--tasks", str(tasks), "--backend", "openai",
                                                       "--base-url", base, "--run", str(run)]))
        stored = json.loads(ctx.model_dump_json())
        stored["model"]["model"] = ""  # what an older videvolve wrote
        run.mkdir()
        RunDir(run).settings.write_text(json.dumps(stored))
        resumed = build_context(build_parser().parse_args(["evolve", "--run", str(run), "--resume"]))
    assert resumed.model.model == "served-name"
    assert "has no model name" in capsys.readouterr().err
    with reserved_port() as port:
        stored["model"]["base_url"] = f"http://127.0.0.1:{port}/v1"
        RunDir(run).settings.write_text(json.dumps(stored))
        with pytest.raises(UsageError, match="could not be asked"):
            build_context(build_parser().parse_args(["evolve", "--run", str(run), "--resume", "--timeout", "2"]))
