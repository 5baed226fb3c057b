"""SimVLM's replies are keyed by its revision (the response cache, stored results): replies that change under the
same revision are taken from a cache made by the old ones. This test pins the replies of a revision: where SimVLM is
changed so that it answers otherwise, bump ``SimVLM.revision`` and write the new digest here."""

from __future__ import annotations

import hashlib

from videvolve.media.captions import frame_caption
from videvolve.media.data_url import encode_data_url
from videvolve.media.decode import frames_at
from videvolve.models.sim import SimVLM
from videvolve.skill_library import prompts

DIGESTS = {"2": "8800bdf3625a6880fcf378388a3276ac1e7f5c1e662f2014d3dbefdad52f8409",
           "3": "8800bdf3625a6880fcf378388a3276ac1e7f5c1e662f2014d3dbefdad52f8409"}
"""Each revision's replies (revision 1 read no frame captioned 0.00 s; it was never pinned). Revision 3 answers these
full-size frames as 2 did: it differs where the processor shrinks a picture (tests/test_sim_processor_view.py)."""


def replies(world) -> list[str]:
    """SimVLM's replies to the four kinds of request the SDK sends, on frames of two videos (0.00 s among them)."""
    vlm = SimVLM()
    out = []
    for task in [t for t in world.tasks if t.split == "test"][:6]:
        frames = frames_at(task.video, [0.0, 1.0, 7.5, 30.0, 61.25, 120.0], clamp=True)
        content: list[dict[str, object]] = []
        for f in frames:
            content += [{"type": "text", "text": frame_caption(f.requested)},
                        {"type": "image_url", "image_url": {"url": encode_data_url(f.image, "png")}}]
        asks = [prompts.render("describe"), prompts.render("match", target=task.question),
                prompts.render("answer_grounding", question=task.question, duration=f"{task.duration or 0:.0f}")]
        if task.options:
            asks.append(prompts.render("answer_mcq", question=task.question,
                                       options=prompts.options_block(task.options)))
        for ask in asks:
            out.append(vlm.complete([{"role": "user", "content": [*content, {"type": "text", "text": ask}]}]).text)
    return out


def test_simvlm_answers_as_its_revision_did(small_world):
    digest = hashlib.sha256("\n\x00".join(replies(small_world)).encode()).hexdigest()
    assert DIGESTS.get(SimVLM.revision) == digest, (
        f"SimVLM answers otherwise than revision {SimVLM.revision!r} did: bump SimVLM.revision (so no cache or "
        f"stored result made by the old replies is taken for the new ones) and pin {digest} here; where SynthWorld's "
        "renderer changed instead (other pixels are other keys), pin it under the same revision")


def test_a_simvlm_served_over_http_keys_its_replies_by_its_revision(monkeypatch):
    """``serve-sim`` (plain and ``--mimic vllm``) serves SimVLM under a root naming its revision, so a client's
    cache keys change with it as the in-process SimVLM's do (before: the served name alone, and replies an older
    revision gave over HTTP were reused)."""
    from videvolve.config import ModelSettings
    from videvolve.models.openai_backend import openai_vlm
    from videvolve.models.sim.mimic import MimicSettings
    from videvolve.models.sim.server import create_app
    from videvolve.testing import serve_app

    seen = []
    for revision in ("2", "3"):
        monkeypatch.setattr(SimVLM, "revision", revision)
        for mimic in (None, MimicSettings()):
            with serve_app(create_app("simvlm", mimic=mimic)) as base:
                vlm = openai_vlm(ModelSettings(backend="openai", base_url=base, model="simvlm"))
                vlm.reach()
                seen.append(vlm.revision)
    assert seen[0] == seen[1] != seen[2] == seen[3], seen  # plain and mimic alike; revision 2 is not 3
    assert all(f"revision-{r}" in s for r, s in zip("2233", seen, strict=True)), seen
