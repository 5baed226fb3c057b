"""A speaking SynthWorld: the narrator's captions, the mix of question types, and SimVLM reading what is said."""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from pathlib import Path
from typing import TypedDict

import numpy as np
import pytest
from PIL import Image

from videvolve.datasets.synthworld import generate_world, plan_world
from videvolve.datasets.synthworld.narration import WRONG_SHARE, espeak_available, narrate
from videvolve.datasets.synthworld.render import render_frame
from videvolve.datasets.synthworld.spoken import parse_mix
from videvolve.datasets.transcripts import check_transcripts, load_transcript, normalise, parse_subtitles, render
from videvolve.errors import UsageError
from videvolve.media.captions import frame_caption
from videvolve.models.parsing import parse_letter
from videvolve.models.sim import SimVLM
from videvolve.skill_library import prompts
from videvolve.tasks import Task


class Plan(TypedDict):
    """``plan_world``'s arguments but ``narration``."""

    videos: int
    minutes: float
    seed: int
    questions: int


PLAN: Plan = {"videos": 60, "minutes": 10, "seed": 7, "questions": 20}


@pytest.fixture(scope="module")
def planned():
    scripts, tasks = plan_world(narration=True, **PLAN)
    return {s.video_id: s for s in scripts}, tasks


def test_narration_is_a_vtt_beside_each_video_inside_it(tmp_path: Path):
    world = generate_world(tmp_path / "w", videos=2, minutes=1.5, seed=3, questions=10, narration=True, workers=1)
    for script in world.scripts:
        vtt = tmp_path / "w" / "videos" / f"{script.video_id}.vtt"
        segments = parse_subtitles(vtt).segments
        assert segments and all(0 <= s.start < s.end <= script.duration for s in segments)
        assert [s.text for s in segments] == [ln.text for ln in world.narrations[script.video_id].lines]
    assert check_transcripts(world.tasks) == []  # what `tasks validate` checks
    task = world.tasks[0]
    assert load_transcript(task) is not None  # found beside the video: the harness's ctx.transcript reads it


def test_a_world_written_over_a_speaking_one_keeps_none_of_its_captions(tmp_path: Path):
    """``synth W --narration`` then ``synth W --seed 2`` (another, silent world into the same folder): the first
    world's captions stayed beside the second's videos of the same names, and every harness read them as what those
    videos say (a narrator naming rooms and glyphs of another world); ``tasks validate`` said nothing."""
    speaking = generate_world(tmp_path / "w", videos=1, minutes=0.5, seed=1, questions=4, narration=True, workers=1)
    (tmp_path / "w" / "videos" / "video000.srt").write_text("1\n00:00:00,000 --> 00:00:01,000\nold\n")
    assert all(load_transcript(t) is not None for t in speaking.tasks)
    silent = generate_world(tmp_path / "w", videos=1, minutes=0.5, seed=2, questions=4, workers=1)
    assert [load_transcript(t) for t in silent.tasks] == [None] * len(silent.tasks)  # main: the seed-1 narration
    assert sorted(p.name for p in (tmp_path / "w" / "videos").iterdir()) == ["video000.mp4"]
    again = generate_world(tmp_path / "w", videos=1, minutes=0.5, seed=3, questions=4, narration=True, workers=1)
    transcript = load_transcript(again.tasks[0])
    assert transcript is not None
    said = [s.text for s in transcript.segments]
    assert said == [ln.text for ln in again.narrations["video000"].lines]


def test_a_silent_world_is_unchanged_by_the_option():
    _, silent = plan_world(videos=4, minutes=5, seed=1)
    _, again = plan_world(videos=4, minutes=5, seed=1, narration=False)
    assert silent == again and all("evidence" not in t.meta for t in silent)


def test_the_mix_of_question_types_is_as_configured(planned):
    _, tasks = planned
    for kind in ("mcq", "grounding"):
        got = Counter(t.meta["evidence"] for t in tasks if t.kind == kind)
        total = sum(got.values())
        for evidence, share in {"pictures": 0.4, "words": 0.3, "both": 0.3}.items():
            assert abs(got[evidence] / total - share) <= 0.05, (kind, got)
    _, other = plan_world(videos=6, minutes=10, seed=7, questions=20, narration=True,
                          mix=parse_mix("pictures=1,words=1"))
    got = Counter(t.meta["evidence"] for t in other)
    assert set(got) == {"pictures", "words"} and abs(got["pictures"] - got["words"]) <= 12  # one per kind and video
    with pytest.raises(UsageError, match="cannot read the mix part"):
        parse_mix("pictures=0.5,sounds=0.5")


def test_what_is_said_and_what_is_shown_do_not_overlap(planned):
    scripts, tasks = planned
    narrations = {v: narrate(s, PLAN["seed"]) for v, s in scripts.items()}
    for t in tasks:
        said = " " + normalise(" ".join(ln.text for ln in narrations[t.video_id].lines)) + " "
        if t.meta["evidence"] == "pictures" and t.options:  # a picture question's options are never said
            assert not any(f" {normalise(o)} " in said for o in t.options), t
        if t.meta["evidence"] == "words" and t.kind == "mcq":
            assert f" {normalise(t.options[0])} " in said  # the names in its options are all said
    rooms = [(v, ln) for v, n in narrations.items() for ln in n.lines if ln.kind == "room"]
    wrong = [ln for _, ln in rooms if ln.wrong]
    assert abs(len(wrong) / len(rooms) - WRONG_SHARE) < 0.1  # a commentator who is sometimes wrong ...
    for video_id, ln in rooms:  # ... about what the pictures show at that moment
        assert (ln.room != scripts[video_id].scene_at(ln.start).background) == ln.wrong
    for n in narrations.values():  # a name is said while its glyph is on screen
        for ln in n.intros:
            assert ln.event is not None and ln.event.start <= ln.start < ln.end <= ln.event.end


def _ask(t: Task, transcript: str | None, pictures: list[dict] | None = None) -> str:
    if t.kind == "mcq":
        prompt = prompts.render("answer_mcq", question=t.question, options=prompts.options_block(t.options or []))
    else:
        prompt = prompts.render("answer_grounding", question=t.question, duration=f"{t.duration:.0f}")
    parts = [*(pictures or []), *([{"type": "text", "text": transcript}] if transcript else []),
             {"type": "text", "text": prompt}]
    return SimVLM().complete([{"role": "user", "content": parts}]).text


def _transcript(scripts, video_id: str) -> str:
    return "Transcript:\n" + render(narrate(scripts[video_id], PLAN["seed"]).segments())


def test_simvlm_answers_words_questions_from_the_transcript_and_guesses_without(planned):
    scripts, tasks = planned
    words = [t for t in tasks if t.meta["evidence"] == "words"]
    mcq = [t for t in words if t.kind == "mcq"]
    heard = [parse_letter(_ask(t, _transcript(scripts, t.video_id)), 4) == t.answer for t in mcq]
    blind = [parse_letter(_ask(t, None), 4) == t.answer for t in mcq]
    assert len(mcq) >= 150 and all(heard)
    assert abs(float(np.mean(blind)) - 0.25) < 0.1
    for t in [t for t in words if t.kind == "grounding"][:30]:  # "When is Bruno mentioned?": when it is said
        spans = json.loads(_ask(t, _transcript(scripts, t.video_id)))  # the transcript shows times to 0.1 s
        assert len(spans) == len(t.intervals)
        assert all(abs(a - i.start) <= 0.06 and abs(b - i.end) <= 0.06 for (a, b), i in zip(spans, t.intervals,
                                                                                                 strict=True))
        assert json.loads(_ask(t, None)) == []


def _frame(script, t: float) -> list[dict]:
    buf = io.BytesIO()
    Image.fromarray(render_frame(script, t)).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return [{"type": "text", "text": frame_caption(t)}, {"type": "image_url", "image_url": {"url": url}}]


@pytest.mark.slow
def test_a_both_question_needs_the_words_and_the_pictures(planned):
    """'What is the name of the red circle?': a full-size frame while the name is said, and the transcript."""
    scripts, tasks = planned
    both = [t for t in tasks if t.meta["template"] == "name_of"]
    hits: dict[str, list[bool]] = {"both": [], "words": [], "pictures": []}
    for t in both:
        frame = _frame(scripts[t.video_id], t.evidence[0].start + 0.25)
        said = _transcript(scripts, t.video_id)
        replies = {"both": _ask(t, said, frame), "words": _ask(t, said), "pictures": _ask(t, None, frame)}
        for name, reply in replies.items():
            hits[name].append(parse_letter(reply, 4) == t.answer)
    assert len(both) >= 100
    assert all(hits["both"])
    for name in ("words", "pictures"):  # either alone does not settle it: SimVLM guesses
        assert abs(float(np.mean(hits[name])) - 0.25) < 0.1, name


@pytest.mark.slow
def test_speech_puts_the_narration_into_the_sound_track(tmp_path: Path):
    if not espeak_available():
        pytest.skip("espeak-ng is not installed (apt install espeak-ng)")
    from videvolve.media.audio import has_audio

    world = generate_world(tmp_path / "w", videos=1, minutes=1, seed=2, questions=6, speech=True, workers=1)
    video = Path(world.tasks[0].video)
    assert has_audio(video) and video.with_suffix(".vtt").is_file()


def test_synth_narration_from_the_command_line(tmp_path: Path, capsys):
    from videvolve.cli import main

    assert main(["synth", str(tmp_path / "w"), "--videos", "2", "--minutes", "1", "--questions", "8", "--narration",
                 "--mix", "pictures=0.5,words=0.5", "--workers", "1", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert set(stats["evidence"]) <= {"pictures", "words"} and stats["evidence"]["pictures"] > 0
    assert sorted(p.suffix for p in (tmp_path / "w" / "videos").iterdir()) == [".mp4", ".mp4", ".vtt", ".vtt"]
    assert main(["synth", str(tmp_path / "x"), "--narration", "--mix", "pictures=-1"]) == 2
