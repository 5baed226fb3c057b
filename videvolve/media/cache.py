"""A bounded, per-process LRU cache of decoded frames keyed by (path, size, mtime, max_side, pts)."""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from dataclasses import dataclass

from PIL import Image

from videvolve.media.info import FileKey

DEFAULT_CACHE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class CachedFrame:
    """A decoded frame and the span [time, end) during which it is on screen."""

    time: float
    end: float
    image: Image.Image

    @property
    def nbytes(self) -> int:
        """Approximate memory held by the image."""
        return self.image.width * self.image.height * len(self.image.getbands())


class FrameCache:
    """LRU over decoded frames, bounded by bytes. Thread-safe.

    A lookup by time finds the cached frame whose on-screen span contains it, so two requests for different times
    that show the same frame share one entry.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[FileKey, int | None, float], CachedFrame] = OrderedDict()
        self._starts: dict[tuple[FileKey, int | None], list[float]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes currently held."""
        return self._bytes

    def get(self, key: FileKey, max_side: int | None, t: float) -> CachedFrame | None:
        """The cached frame on screen at ``t``, if any."""
        with self._lock:
            starts = self._starts.get((key, max_side))
            if starts:
                i = bisect.bisect_right(starts, t) - 1
                if i >= 0:
                    ek = (key, max_side, starts[i])
                    entry = self._entries[ek]
                    if entry.time <= t < entry.end:
                        self._entries.move_to_end(ek)
                        self.hits += 1
                        return entry
            self.misses += 1
            return None

    def put(self, key: FileKey, max_side: int | None, frame: CachedFrame) -> None:
        """Insert a frame, evicting the least recently used ones beyond the byte bound."""
        if frame.nbytes > self.max_bytes:
            return
        with self._lock:
            ek = (key, max_side, frame.time)
            if ek in self._entries:
                self._entries.move_to_end(ek)
                return
            self._entries[ek] = frame
            bisect.insort(self._starts.setdefault((key, max_side), []), frame.time)
            self._bytes += frame.nbytes
            while self._bytes > self.max_bytes and self._entries:
                (okey, oside, otime), old = self._entries.popitem(last=False)
                self._bytes -= old.nbytes
                starts = self._starts[(okey, oside)]
                del starts[bisect.bisect_left(starts, otime)]
                if not starts:
                    del self._starts[(okey, oside)]

    def clear(self) -> None:
        """Drop everything and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._starts.clear()
            self._bytes = 0
            self.hits = self.misses = 0


frame_cache = FrameCache()
"""The process-wide cache used by :func:`videvolve.media.frames_at` unless told otherwise."""
