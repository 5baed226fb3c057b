"""Images as ``data:`` URLs, with a bounded per-process LRU of the encoded frames of videos.

Encoding is the client's largest repeated cost per image (PNG or JPEG, then base64): tasks on one video ask for the
same frames again and again (every uniform harness on a video, every round of a chat), so an encoded frame is kept
by (file version, max side, frame start, format, quality), next to the decoded ones in ``cache.py``.
"""

from __future__ import annotations

import base64
import io
import threading
from collections import OrderedDict
from collections.abc import Hashable

from PIL import Image

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024


def encode_data_url(image: Image.Image, image_format: str, jpeg_quality: int = 90) -> str:
    """``data:image/png;base64,...`` (lossless, zlib level 3) or ``data:image/jpeg;base64,...``."""
    buf = io.BytesIO()
    if image_format == "jpeg":
        image.save(buf, format="JPEG", quality=jpeg_quality)
        mime = "image/jpeg"
    else:
        image.save(buf, format="PNG", optimize=False, compress_level=3)
        mime = "image/png"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode()}"


class DataUrlCache:
    """LRU of encoded images bounded by the bytes of their URLs. Thread-safe."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, str] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def url(self, key: Hashable | None, image: Image.Image, image_format: str, jpeg_quality: int = 90) -> str:
        """The image's URL, from the cache when ``key`` (None: never cached) was encoded before in this format."""
        if key is None:
            return encode_data_url(image, image_format, jpeg_quality)
        full = (key, image_format, jpeg_quality if image_format == "jpeg" else None)
        with self._lock:
            found = self._entries.get(full)
            if found is not None:
                self._entries.move_to_end(full)
                self.hits += 1
                return found
            self.misses += 1
        url = encode_data_url(image, image_format, jpeg_quality)
        if len(url) <= self.max_bytes:
            with self._lock:
                if full not in self._entries:
                    self._entries[full] = url
                    self._bytes += len(url)
                while self._bytes > self.max_bytes:
                    _, old = self._entries.popitem(last=False)
                    self._bytes -= len(old)
        return url

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0


data_url_cache = DataUrlCache()
