"""Which videos of a folder get tasks, decided before any task is made.

Two files with the same content are one video: were both given tasks, the video-disjoint split could put one copy in
train and the other in selection, and the selection questions would be train questions.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from pathlib import Path

from videvolve.media.fingerprint import fingerprint

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
