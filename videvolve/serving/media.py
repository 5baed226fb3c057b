"""Where a served video comes from: a file under a media root, an http(s) URL, or a data URL.

Local paths are confined to the media roots the server was started with (after resolving symlinks and ``..``);
downloads and data URLs are written to a private temporary folder, size-capped, and removed after the answer.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx

from videvolve.errors import InputNotFoundError, UsageError, VidevolveError

MAX_VIDEO_BYTES = 2 * 1024**3
"""The largest video a request may bring by URL or data URL."""
DOWNLOAD_S = 600.0
"""The longest a video's download may take in all (a server trickling it would otherwise hold the request)."""
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[\w-]+=[\w.-]+)*)(?P<b64>;base64)?,",
                       re.I)


class OutsideMediaRoots(VidevolveError, PermissionError):
    """A local video path lies outside every media root the server was started with."""


class BadVideoSource(UsageError):
    """A video reference that is not a usable file path, file://, http(s) or data URL."""


class VideoUnreachable(VidevolveError, ConnectionError):
    """An http(s) video could not be downloaded."""


class MediaRoots:
    """The folders local videos may come from (none: no local video at all), and whether URLs may be fetched."""

    def __init__(self, roots: Sequence[str | Path], fetch: bool = True) -> None:
        self.fetch = fetch
        """Whether http(s) videos are downloaded (off: a server reachable by others cannot be made to fetch from
        the hosts it can reach)."""
        self.roots = [Path(r).expanduser().resolve() for r in roots]
        for root in self.roots:
            if not root.is_dir():
                raise InputNotFoundError(f"media root {root} is not a folder (check --media-root)")

    def resolve(self, path: str | Path) -> Path:
        """A local video inside a media root (a relative path is taken from the first root)."""
        if not self.roots:
            raise OutsideMediaRoots(f"local videos are not served: start the server with --media-root DIR "
                                    f"(asked for {path})")
        try:  # a NUL byte (ValueError), ~no-such-user (RuntimeError)
            p = Path(path).expanduser()
            p = (p if p.is_absolute() else self.roots[0] / p).resolve()
        except (ValueError, RuntimeError, OSError) as exc:
            raise _unusable(str(path), exc) from None
        if not any(p.is_relative_to(root) for root in self.roots):
            shown = ", ".join(map(str, self.roots))
            raise OutsideMediaRoots(f"{path} is outside the media roots ({shown}); only videos under them are served")
        try:
            found = p.is_file()
        except (ValueError, OSError) as exc:  # a name too long, a folder this server may not read
            raise _unusable(str(path), exc) from None
        if not found:
            raise InputNotFoundError(f"no video at {p} (under the media roots)")
        return p


def _unusable(ref: str, exc: Exception) -> BadVideoSource:
    return BadVideoSource(f"the video {ref[:100]!r} is not a usable path or URL ({type(exc).__name__}: "
                          f"{str(exc)[:200]}): send a path under a media root, a file://, http(s):// or data: URL")


def _write_capped(chunks: Iterator[bytes], dest: Path, source: str, deadline: float = math.inf) -> Path:
    size = 0
    with dest.open("wb") as fh:
        for chunk in chunks:
            size += len(chunk)
            if size > MAX_VIDEO_BYTES:
                raise BadVideoSource(f"the video at {source[:100]} is over {MAX_VIDEO_BYTES} bytes")
            if time.monotonic() > deadline:
                raise VideoUnreachable(f"the video at {source[:100]} was still arriving ({size} bytes) after the "
                                       f"{DOWNLOAD_S:g} s a download may take; put it under a media root instead")
            fh.write(chunk)
    return dest


def _from_data_url(url: str, dest: Path) -> Path:
    m = _DATA_URL.match(url)
    if m is None or not m.group("b64"):
        raise BadVideoSource("a data URL video must be base64: data:video/mp4;base64,...")
    try:
        data = base64.b64decode(url[m.end():], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadVideoSource(f"the data URL's base64 cannot be decoded: {exc}") from None
    return _write_capped(iter([data]), dest, "data URL")


def _download(url: str, dest: Path, timeout_s: float) -> Path:
    deadline = time.monotonic() + DOWNLOAD_S  # httpx's timeout is per read: a trickled body would never end
    try:
        with httpx.stream("GET", url, timeout=timeout_s, follow_redirects=True) as response:
            if response.status_code != 200:
                raise VideoUnreachable(f"fetching the video {url} answered HTTP {response.status_code}")
            return _write_capped(response.iter_bytes(), dest, url, deadline)  # chunks as they come
    except (httpx.InvalidURL, UnicodeError) as exc:  # a character or a host name no request can carry
        raise _unusable(url, exc) from None
    except httpx.HTTPError as exc:
        raise VideoUnreachable(f"cannot fetch the video {url}: {type(exc).__name__}: {exc}") from None


@contextmanager
def video_file(url: str, roots: MediaRoots, timeout_s: float = 120.0) -> Iterator[Path]:
    """A local file for a video reference, for the duration of the ``with`` block.

    ``file:///abs/path`` and plain paths must lie under a media root; ``http(s)://`` is downloaded and
    ``data:video/...;base64,`` decoded into a temporary folder removed afterwards.
    """
    try:
        parsed = urlparse(url)  # "http://[::1/v.mp4": ValueError
    except ValueError as exc:
        raise _unusable(url, exc) from None
    # a plain path may hold a colon ("clip:1.mp4"); file:/abs/path is RFC 8089's short form (Java's File.toURI)
    scheme = parsed.scheme.lower() if "://" in url or url[:5].lower() in ("data:", "file:") else ""
    if scheme in ("", "file"):
        yield roots.resolve(unquote(parsed.path) if scheme == "file" else url)
        return
    if scheme not in ("http", "https", "data"):
        raise BadVideoSource(f"unsupported video URL scheme {scheme!r}: use file://, http(s):// or a data URL")
    if scheme != "data" and not roots.fetch:
        raise OutsideMediaRoots(f"this server does not fetch videos by URL (started with --no-fetch): {url[:100]}")
    with tempfile.TemporaryDirectory(prefix="videvolve-serve-") as tmp:
        dest = Path(tmp) / "video"
        yield _from_data_url(url, dest) if scheme == "data" else _download(url, dest, timeout_s)
