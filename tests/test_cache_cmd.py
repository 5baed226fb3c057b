"""`videvolve cache info|clear`: a model's replies told apart and forgotten (a server fixed under the same name
gave back its wrong replies from the cache, and only deleting the whole file helped)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from videvolve.cli import main
from videvolve.models.base import Reply
from videvolve.models.cache import ResponseCache, complete
from videvolve.models.sim import SimVLM


class Other(SimVLM):
    name = "other"


ASK = [{"role": "user", "content": "What is shown?"}]


def test_one_models_replies_are_listed_and_forgotten(tmp_path: Path, capsys) -> None:
    path = tmp_path / "responses.sqlite"
    cache = ResponseCache(path)
    complete(SimVLM(), ASK, None, cache)
    complete(Other(), ASK, None, cache)
    complete(Other(), [{"role": "user", "content": "And now?"}], None, cache)
    cache.close()
    assert main(["cache", "info", "--cache", str(path), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert {m["model"]: m["replies"] for m in said["models"]} == {"other": 2, "simvlm": 1} and said["replies"] == 3
    assert main(["cache", "clear", "--model", "nobody", "--cache", str(path)]) == 2
    assert "other, simvlm" in " ".join(capsys.readouterr().err.split())
    assert main(["cache", "clear", "--cache", str(path)]) == 2  # neither --model nor --all
    capsys.readouterr()
    assert main(["cache", "clear", "--model", "other", "--cache", str(path)]) == 0
    assert "forgot 2 replies of other" in capsys.readouterr().out
    cache = ResponseCache(path)
    assert complete(Other(), ASK, None, cache).cached is False  # asked again
    assert complete(SimVLM(), ASK, None, cache).cached is True  # the other model's kept
    cache.close()


def test_a_cache_made_before_names_were_kept_is_read_and_cleared_whole(tmp_path: Path, capsys) -> None:
    path = tmp_path / "responses.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
    db.execute("INSERT INTO replies VALUES (?, ?)", ("k", json.dumps(Reply(text="A").to_dict())))
    db.commit()
    db.close()
    cache = ResponseCache(path)
    assert cache.get("k") is not None and cache.models() == {None: 1}
    cache.close()
    assert main(["cache", "clear", "--model", "simvlm", "--cache", str(path)]) == 2
    assert "only with --all" in " ".join(capsys.readouterr().err.split())
    assert main(["cache", "clear", "--all", "--cache", str(path)]) == 0
    assert ResponseCache(path).models() == {}
