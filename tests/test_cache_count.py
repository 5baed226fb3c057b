"""`eval` and `ask` say how many replies came from the response cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from videvolve.cli import main
from videvolve.models.cache import CacheUse


def replies_line(stdout: str) -> tuple[int, int]:
    m = re.search(r"(\d+) of (\d+) replies from the response cache \(--no-cache to disable\)", stdout)
    assert m, stdout
    return int(m.group(1)), int(m.group(2))


def test_eval_summary_counts_replies_from_the_cache(small_world, seed: Path, tmp_path: Path, capsys):
    cache = tmp_path / "cache.sqlite"

    def run(out: str, *extra: str) -> str:
        code = main(["eval", "--tasks", str(small_world.tasks_path), "--split", "all", "--harness", str(seed),
                     "--limit", "3", "--out", str(tmp_path / out), "--cache", str(cache), *extra])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        return printed.out

    hits, replies = replies_line(run("a"))
    assert hits == 0 and replies >= 3  # a cold cache
    assert replies_line(run("b")) == (replies, replies)  # the same requests again: every reply cached
    rerun = run("b")  # results already in b/ are reused: no request at all
    assert replies_line(rerun) == (0, 0) and "3 result(s) reused from the output folder" in rerun
    off = json.loads(run("c", "--no-cache", "--json"))["cache_use"]
    assert off == {"replies": replies, "from_cache": 0, "enabled": False, "reused_results": 0, "rerun_results": 0}
    task = [t for t in small_world.tasks if t.kind == "grounding"][-1]  # not among the three eval asked about
    ask = ["ask", task.video, task.question, "--harness", str(seed), "--cache", str(cache), "--grounding"]
    first, second = run_ask(ask, capsys), run_ask(ask, capsys)
    assert replies_line(first)[0] == 0 and replies_line(second) == (replies_line(first)[1],) * 2


def run_ask(args: list[str], capsys) -> str:
    code = main(args)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return printed.out


def test_cache_use_line_and_sums():
    use = CacheUse.of([{"requests": 30, "cache_hits": 12}, {"requests": 10, "cache_hits": 0}, {}], enabled=True)
    assert use.line() == "12 of 40 replies from the response cache (--no-cache to disable)"
    assert "turned off by --no-cache" in CacheUse.of([{"requests": 2}], enabled=False).line()


def test_a_reply_cached_for_one_processor_is_not_served_to_another(tmp_path: Path):
    """SimVLM counts a reply's prompt tokens with its family's processor: a reply cached under qwen2.5-vl carried
    its usage into a qwen3-vl run (the cache key left the family out)."""
    import base64
    import io

    from PIL import Image

    from videvolve.models.cache import ResponseCache, complete
    from videvolve.models.sim import SimVLM

    buf = io.BytesIO()
    Image.new("RGB", (448, 448), (10, 20, 30)).save(buf, format="PNG")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(buf.getvalue())
                                                .decode()}}
    messages = [{"role": "user", "content": [image, {"type": "text", "text": "What colour is it? A. red B. blue"}]}]
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = complete(SimVLM("qwen2.5-vl"), messages, None, cache)
    other = complete(SimVLM("qwen3-vl"), messages, None, cache)
    assert not other.cached and other.usage.prompt_tokens != first.usage.prompt_tokens
    assert complete(SimVLM("qwen3-vl"), messages, None, cache).cached  # its own reply is reused


def test_the_response_cache_lives_under_xdg_cache_home_as_the_other_caches_do(tmp_path: Path, monkeypatch):
    """It was always ``~/.cache/videvolve``, while proxies, transcripts and Whisper models honoured $XDG_CACHE_HOME."""
    from videvolve.config import default_cache_path
    from videvolve.media.proxy import default_proxy_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "videvolve" / "responses.sqlite"
    assert default_proxy_dir().parent == default_cache_path().parent
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_path() == tmp_path / "home" / ".cache" / "videvolve" / "responses.sqlite"


@pytest.mark.parametrize("xdg", ["", "relative/cache"])
def test_an_empty_or_relative_xdg_cache_home_puts_every_cache_in_the_home_cache(xdg: str, tmp_path: Path,
                                                                                monkeypatch):
    """XDG says to ignore both. Proxies, transcripts and Whisper models took an empty one as the folder a command ran
    in (``./videvolve/proxies``), while the response cache went to ``~/.cache``; a relative one put every cache under
    the working folder, another for each folder a command runs from (nothing found again)."""
    from videvolve.config import default_cache_path
    from videvolve.datasets.transcripts import default_transcript_cache
    from videvolve.media.proxy import make_proxy
    from videvolve.media.speech import whisper_cache
    from videvolve.testing import make_index_video

    video = make_index_video(tmp_path / "v.mp4", seconds=1.0, width=64, height=48)
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    monkeypatch.chdir(work)
    proxy = make_proxy(video)  # main (empty): work/videvolve/proxies/...
    cache = home / ".cache" / "videvolve"
    assert proxy.parent == cache / "proxies" and proxy.is_file()
    assert default_cache_path().parent == cache
    assert default_transcript_cache() == cache / "transcripts" and whisper_cache() == cache / "whisper"
    assert not any(work.iterdir())


def test_without_a_writable_cache_home_the_response_cache_is_this_users_alone(tmp_path: Path, monkeypatch):
    """The fallback was ``/tmp/videvolve-cache`` for every user: one user got the replies another stored (or planted)
    there. It is now ``videvolve-cache-<uid>``, mode 0700; one that is not this user's alone is not used."""
    import os
    import tempfile

    from videvolve.config import default_cache_path
    from videvolve.models.cache import ResponseCache

    blocked = tmp_path / "home-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # not writable: a file where the folder would be
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = default_cache_path()
    assert path.parent == tmp_path / "tmp" / f"videvolve-cache-{os.getuid()}"  # main: tmp/videvolve-cache
    assert path.parent.stat().st_mode & 0o777 == 0o700
    ResponseCache(path).close()
    os.chmod(path.parent, 0o777)  # as another user's folder would be to this one: open to others
    other = default_cache_path()
    assert other.parent != path.parent and not other.exists()  # a new private folder: nothing of theirs read
    assert other.parent.stat().st_mode & 0o777 == 0o700
