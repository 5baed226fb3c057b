"""Which videos of a folder get tasks, and which may be spliced into which, decided before any task is made.

Two files with the same content are one video: were both given tasks, the video-disjoint split could put one copy in
train and the other in selection, and the selection questions would be train questions. The split itself is made
before the tasks, so that a video's splice needle comes only from a video of its own split: a train frame never
shows seconds of a selection video, nor the other way round.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from pathlib import Path

from videvolve.errors import MediaError
from videvolve.media.fingerprint import fingerprint
from videvolve.media.info import probe
from videvolve.tasks import video_splits

log = logging.getLogger(__name__)


def same_content(videos: Mapping[str, Path], prefer: Collection[str] = ()) -> dict[str, Path]:
    """Each video that repeats another's content (the same bytes under another name) -> the video kept for both.

    Of a group of copies the one kept is a video named in ``prefer`` (paths an earlier run into the same ``--out``
    gave tasks to: its tasks, results and split stay), else the first in the folder's order. A file that cannot be
    read is kept: its own error is reported when its tasks are made.
    """
    first: dict[str, Path] = {}
    repeats: dict[str, Path] = {}
    order = sorted(videos.items(), key=lambda item: str(item[1]) not in prefer)  # stable: folder order otherwise
    for vid, path in order:
        try:
            digest = fingerprint(path)
        except (OSError, UnicodeError) as exc:  # a name the memo cannot hold is refused by name later
            log.debug("not fingerprinted (%s): %s", exc, path)
            continue
        if digest in first:
            repeats[vid] = first[digest]
        else:
            first[digest] = path
    return repeats


def repeat_note(kept: str) -> str:
    """Why a copy of another video of the folder gets no tasks, and what to do."""
    return (f"the same video as {kept} (identical content): skipped, so that one video never lands in two splits "
            "(its tasks would be another split's questions); remove or move one of the two copies to silence this")


def early_splits(videos: Mapping[str, Path], fractions: Mapping[str, float], seed: int) -> dict[str, str]:
    """Each video's split, made before its tasks, among the videos that open (one that does not gets no tasks).

    A video that opens but gets no question (too short, damaged further in) keeps its place in its split.
    """
    opening = []
    for vid, path in videos.items():
        try:
            probe(path)
        except (MediaError, OSError):
            continue
        opening.append(vid)
    return video_splits(opening, fractions, seed)


def splice_pools(videos: Mapping[str, Path], splits: Mapping[str, str]) -> dict[str, list[str]]:
    """The videos (resolved paths) each video may splice in: the others of its own split; none for one without."""
    return {vid: [str(p.resolve()) for v, p in videos.items() if v != vid and vid in splits
                  and splits.get(v) == splits[vid]]
            for vid in videos}


def alone_note(split: str) -> str:
    """Why a video alone in its split gets no splice needle, and what to do."""
    return (f"the only video of the {split} split: no other video is spliced into it (a splice comes only from a "
            "video of the same split, so that no frame shows another split's seconds), so its real footage gets no "
            "splice question; a folder with more videos gives every split some")
