"""SimVLM sees a picture as its processor feeds the encoder, the size its tokens are metered at.

The cost model meters an image at the size the server's processor resizes it to (a picture over ``max_pixels``
shrunk to fit, sides rounded to the patch grid). SimVLM read the picture as sent: a harness could send a contact
sheet of hundreds of full-size cells, metered at ``--max-pixels`` (1,227 tokens under the docs' 1,003,520) and read
by SimVLM at full size, where the real model is shown cells a quarter as wide: resolution bought at no cost.
"""

from __future__ import annotations

import pytest
from PIL import Image

from videvolve.config import ModelSettings
from videvolve.datasets.synthworld.render import render_frame
from videvolve.datasets.synthworld.script import make_script
from videvolve.media.captions import frame_caption, sheet_caption
from videvolve.media.data_url import encode_data_url
from videvolve.media.decode import Frame
from videvolve.media.sheet import contact_sheet
from videvolve.models import make_vlm
from videvolve.models.sim import SimVLM
from videvolve.models.sim.perception import perceive

CAP = 1_003_520
"""The max_pixels the docs' vLLM commands set for Qwen2.5-VL."""


def _glyph_frames(n: int) -> tuple[list[Frame], list[str]]:
    """``n`` full-size SynthWorld frames, each showing a glyph 24 or 32 px wide (three per appearance)."""
    script = make_script("v", 3600, seed=3)
    frames: list[Frame] = []
    names: list[str] = []
    for e in script.events:
        for t in (e.start + 0.25, (e.start + e.end) / 2, e.end - 0.25):
            if e.size in (24, 32) and len(frames) < n:
                frames.append(Frame(t, t, Image.fromarray(render_frame(script, t))))
                names.append(e.name)
    assert len(frames) == n
    return frames, names


def _shown(caption: str, image: Image.Image) -> list[dict[str, object]]:
    url = encode_data_url(image, "png")
    return [{"type": "text", "text": caption}, {"type": "image_url", "image_url": {"url": url}}]


def _described(vlm: SimVLM, caption: str, image: Image.Image) -> str:
    content = [*_shown(caption, image), {"type": "text", "text": "Describe each image in one line."}]
    return vlm.complete([{"role": "user", "content": content}]).text


def test_a_sheet_over_max_pixels_is_read_at_the_size_the_model_is_shown():
    frames, names = _glyph_frames(72)
    sheet = contact_sheet(frames + frames, cols=12, cell_width=320)  # 3,866 x 2,330: 9x the cap's area
    names += names
    assert all(perceive(sheet.cell(i)).name == name for i, name in enumerate(names))  # legible as sent
    capped = SimVLM(max_pixels=CAP)
    assert capped.cost.image_tokens(*sheet.image.size) < SimVLM().cost.image_tokens(*sheet.image.size) / 3
    said = _described(capped, sheet_caption(sheet), sheet.image)
    # the model is shown cells a third as wide: 24- and 32-px glyphs shrink to 8 and 11 px, under the readable 13
    assert sum(name in said for name in set(names)) == 0, said
    assert "too small to read" in said
    uncapped = _described(SimVLM(), sheet_caption(sheet), sheet.image)
    assert all(name in uncapped for name in names) and "too small" not in uncapped  # the checkpoint's limits: legible


def test_a_side_rounded_down_to_the_patch_grid_is_read_rounded_down():
    frames, _ = _glyph_frames(1)
    image = frames[0].image.resize((153, 86), Image.Resampling.BILINEAR)
    vlm = SimVLM()
    assert vlm.cost.resized(153, 86) == (140, 84)  # 15 patches metered, not the 16.3 sent
    seen, _, _ = vlm.observe([{"role": "user", "content": _shown(frame_caption(1.0), image)}])
    expected = perceive(image.resize((140, 84), Image.Resampling.BICUBIC))
    assert [s.percept for s in seen] == [expected]


def test_a_side_the_processor_enlarges_is_read_as_sent():
    frames, _ = _glyph_frames(1)
    image = frames[0].image.resize((160, 90), Image.Resampling.BILINEAR)  # processor: 168 x 84
    seen, _, _ = SimVLM().observe([{"role": "user", "content": _shown(frame_caption(1.0), image)}])
    assert [s.percept for s in seen] == [perceive(image.resize((160, 84), Image.Resampling.BICUBIC))]


def test_the_offline_model_has_the_servers_max_pixels():
    vlm = make_vlm(ModelSettings(max_pixels=CAP))
    assert isinstance(vlm, SimVLM) and vlm.cost.max_pixels == CAP
    assert vlm.decoding() != SimVLM().decoding()  # its replies are not taken for the uncapped model's


@pytest.mark.slow  # serve-sim in its own process
def test_plain_serve_sim_reads_through_the_processor_it_is_given():
    """``serve-sim --mm-processor-kwargs '{"max_pixels": ...}'`` without ``--mimic``: its SimVLM sees a sheet as the
    capped processor shows it, as in-process (main: the flags were the mimic's alone, and the plain server's SimVLM
    read every cell at full size for a client metering at the cap)."""
    from videvolve.models.openai_backend import openai_vlm
    from videvolve.testing import serve_sim

    frames, names = _glyph_frames(72)
    sheet = contact_sheet(frames + frames, cols=12, cell_width=320)
    with serve_sim("--mm-processor-kwargs", f'{{"max_pixels": {CAP}}}') as base:  # the command, in its own process
        client = openai_vlm(ModelSettings(backend="openai", base_url=base, model="simvlm", max_pixels=CAP))
        content = [*_shown(sheet_caption(sheet), sheet.image), {"type": "text", "text": "Describe each image."}]
        said = client.complete([{"role": "user", "content": content}]).text
    assert said == _described(SimVLM(max_pixels=CAP), sheet_caption(sheet), sheet.image)
    assert "too small to read" in said and not any(name in said for name in set(names))


@pytest.mark.parametrize("kwargs", ["5", '{"max_pixels": "1003520"}', '{"max_pixels": 0}'])
def test_serve_sim_refuses_processor_kwargs_it_cannot_use(kwargs: str, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch):
    """Plain serve-sim took ``--mm-processor-kwargs`` into SimVLM unchecked: a value that is no object, or a
    ``max_pixels`` that is no positive integer, ended in a traceback reported as a bug (or served no picture)."""
    from videvolve.cli import main
    from videvolve.models.sim import server

    monkeypatch.setattr(server, "serve", lambda host, port, **kwargs: server.create_app(**kwargs))  # no listening
    assert main(["serve-sim", "--port", "1", "--mm-processor-kwargs", kwargs]) == 2
    assert "--mm-processor-kwargs" in capsys.readouterr().err
