"""Where a served video comes from: a file under a media root, an http(s) URL, or a data URL.

Local paths are confined to the media roots the server was started with (after resolving symlinks and ``..``);
downloads and data URLs are written to a private temporary folder, size-capped, and removed after the answer. A
download stops within :data:`CANCEL_POLL_S` once its question is cancelled (its client gone), however it is stalled.
"""

from __future__ import annotations

import base64
import binascii
import re
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import ParseResult, unquote, urlparse

import anyio
import httpx

from videvolve.errors import Cancelled, InputNotFoundError, UsageError, VidevolveError
from videvolve.media.info import probe

MAX_VIDEO_BYTES = 2 * 1024**3
"""The largest video a request may bring by URL or data URL."""
DOWNLOAD_S = 600.0
"""The longest a video's download may take in all (a server trickling it would otherwise hold the request)."""
CANCEL_POLL_S = 0.1
"""How often a download looks whether its question was cancelled."""
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

    def __init__(self, roots: Sequence[str | Path], fetch: bool = True, domains: Sequence[str] = ()) -> None:
        self.fetch = fetch
        """Whether http(s) videos are downloaded (off: a server reachable by others cannot be made to fetch from
        the hosts it can reach)."""
        self.domains = frozenset(d.strip().lower().rstrip(".") for d in domains if d.strip())
        """The hosts http(s) videos may come from, each redirect's included (empty: any), as vLLM's
        ``--allowed-media-domains``: the host name exactly, no subdomain."""
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


def _capped(size: int, source: str) -> None:
    if size > MAX_VIDEO_BYTES:
        raise BadVideoSource(f"the video at {source[:100]} is over {MAX_VIDEO_BYTES} bytes")


def _from_data_url(url: str, dest: Path) -> Path:
    m = _DATA_URL.match(url)
    if m is None or not m.group("b64"):
        raise BadVideoSource("a data URL video must be base64: data:video/mp4;base64,...")
    try:
        data = base64.b64decode(url[m.end():], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadVideoSource(f"the data URL's base64 cannot be decoded: {exc}") from None
    _capped(len(data), "data URL")
    dest.write_bytes(data)
    return dest


def allowed_host(url: str, domains: frozenset[str]) -> None:
    """Refuse (403) a URL whose host is not one of ``domains`` (none: every host is allowed)."""
    host = (urlparse(url).hostname or "").rstrip(".")
    if domains and host not in domains:
        raise OutsideMediaRoots(f"the video's host {host or '(none)'!r} is not among this server's "
                                f"--allowed-media-domains ({', '.join(sorted(domains))}): {url[:100]}")


def _download(url: str, dest: Path, timeout_s: float, cancel: threading.Event | None = None,
              domains: frozenset[str] = frozenset()) -> Path:
    """Download in an event loop of this thread's own: a connect, a silent server or a trickle stops on ``cancel``."""
    try:
        httpx.URL(url).host.encode("idna")  # a label too long: a DNS look-up would say only "not known"
        got = anyio.run(_fetch_or_cancel, url, dest, timeout_s, cancel, domains)
        if isinstance(got, Exception):
            raise got
    except (httpx.InvalidURL, UnicodeError) as exc:  # a character or a host name no request can carry
        raise _unusable(url, exc) from None
    return got


async def _fetch_or_cancel(url: str, dest: Path, timeout_s: float, cancel: threading.Event | None,
                           domains: frozenset[str]) -> Path | Exception:
    """The file, or what was raised instead (returned: a task group would wrap it in an ``ExceptionGroup``)."""
    got: list[Path | Exception] = [Cancelled(f"the download of {url[:100]} was stopped: its client went away")]

    async def fetch() -> None:
        try:
            got[0] = await _fetch(url, dest, timeout_s, domains)
        except Exception as exc:
            got[0] = exc
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(fetch)
        while cancel is None or not cancel.is_set():
            await anyio.sleep(CANCEL_POLL_S)
        tg.cancel_scope.cancel()
    return got[0]


async def _fetch(url: str, dest: Path, timeout_s: float, domains: frozenset[str]) -> Path:
    size = 0

    async def hop(request: httpx.Request) -> None:  # every request, each redirect's too, goes to an allowed host
        allowed_host(str(request.url), domains)

    try:
        with anyio.fail_after(DOWNLOAD_S):  # httpx's timeout is per read: a trickled body would never end
            async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=True,
                                         event_hooks={"request": [hop]}) as client, \
                    client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise VideoUnreachable(f"fetching the video {url} answered HTTP {response.status_code}")
                with dest.open("wb") as fh:
                    async for chunk in response.aiter_bytes():  # chunks as they come
                        size += len(chunk)
                        _capped(size, url)
                        fh.write(chunk)
    except TimeoutError:
        raise VideoUnreachable(f"the video at {url[:100]} was still arriving ({size} bytes) after the "
                               f"{DOWNLOAD_S:g} s a download may take; put it under a media root instead") from None
    except httpx.HTTPError as exc:
        raise VideoUnreachable(f"cannot fetch the video {url}: {_why(exc)}") from None
    return dest


HEAD_S = 20.0
"""The longest :func:`reachable` waits for a video's server to answer its headers."""


def reachable(url: str, domains: frozenset[str] = frozenset()) -> None:
    """Ask an http(s) video's server for its headers only, before a stream opens.

    An unknown host, a refused connection or an error status (a 404, a 403) is :class:`VideoUnreachable` now, as it
    would be without streaming. Redirects are followed, each to an allowed host. A server that does not do HEAD
    (405, 501) is left to the download to judge; so is the body itself (its size, whether it is a video).
    """
    def hop(request: httpx.Request) -> None:
        allowed_host(str(request.url), domains)

    try:
        httpx.URL(url).host.encode("idna")
        with httpx.Client(timeout=HEAD_S, follow_redirects=True, event_hooks={"request": [hop]}) as client:
            status = client.head(url).status_code
    except (httpx.InvalidURL, UnicodeError) as exc:
        raise _unusable(url, exc) from None
    except httpx.HTTPError as exc:
        raise VideoUnreachable(f"cannot fetch the video {url}: {_why(exc)}") from None
    if status >= 400 and status not in (405, 501):
        raise VideoUnreachable(f"fetching the video {url} answered HTTP {status}")


def _why(exc: BaseException) -> str:
    """An error and, where it hides it, its first cause ("All connection attempts failed": which refusal)."""
    said, root = f"{type(exc).__name__}: {exc}", exc
    while (below := root.__cause__ or root.__context__) is not None:
        root = below
    return said if root is exc or str(root) in said else f"{said} ({type(root).__name__}: {root})"


@contextmanager
def video_file(url: str, roots: MediaRoots, timeout_s: float = 120.0,
               cancel: threading.Event | None = None) -> Iterator[Path]:
    """A local file for a video reference, for the duration of the ``with`` block.

    ``file:///abs/path`` and plain paths must lie under a media root; ``http(s)://`` is downloaded and
    ``data:video/...;base64,`` decoded into a temporary folder removed afterwards. ``cancel``: set during a
    download, it stops within :data:`CANCEL_POLL_S` (:class:`~videvolve.errors.Cancelled`).
    """
    scheme, parsed = _scheme(url)
    if scheme in ("", "file"):
        yield roots.resolve(unquote(parsed.path) if scheme == "file" else url)
        return
    _may_fetch(url, scheme, roots)
    with tempfile.TemporaryDirectory(prefix="videvolve-serve-") as tmp:
        dest = Path(tmp) / "video"
        yield _from_data_url(url, dest) if scheme == "data" else _download(url, dest, timeout_s, cancel,
                                                                           roots.domains)


def _scheme(url: str) -> tuple[str, ParseResult]:
    """A video reference's scheme, lower case ('' for a plain path), and the reference parsed."""
    try:
        parsed = urlparse(url)  # "http://[::1/v.mp4": ValueError
    except ValueError as exc:
        raise _unusable(url, exc) from None
    # a plain path may hold a colon ("clip:1.mp4"); file:/abs/path is RFC 8089's short form (Java's File.toURI)
    return parsed.scheme.lower() if "://" in url or url[:5].lower() in ("data:", "file:") else "", parsed


def _may_fetch(url: str, scheme: str, roots: MediaRoots) -> None:
    """Refuse a URL of another scheme than http(s) or data (400), or one this server may not fetch (403)."""
    if scheme not in ("http", "https", "data"):
        raise BadVideoSource(f"unsupported video URL scheme {scheme!r}: use file://, http(s):// or a data URL")
    if scheme != "data" and not roots.fetch:
        raise OutsideMediaRoots(f"this server does not fetch videos by URL (started with --no-fetch): {url[:100]}")
    if scheme != "data":
        allowed_host(url, roots.domains)


def checked_video(url: str, roots: MediaRoots) -> tuple[ExitStack, Path | None]:
    """What can be found wrong with a video before its question is answered, found now (a stream is not yet open).

    A path or ``file://`` URL is resolved under the media roots and a data URL decoded, and the file is probed (not
    a video, no video stream: :class:`~videvolve.errors.UnreadableVideoError`): returned is the file, kept until the
    stack is closed. An ``http(s)://`` URL is checked against ``--no-fetch`` and ``--allowed-media-domains`` and
    asked for its headers (:func:`reachable`: a host that does not answer, a 404), and downloaded when the answer
    begins (None): a download may take minutes, which an open stream keeps alive.
    """
    stack = ExitStack()
    scheme, _ = _scheme(url)
    if scheme in ("http", "https"):
        _may_fetch(url, scheme, roots)
        reachable(url, roots.domains)
        return stack, None
    try:
        path = stack.enter_context(video_file(url, roots))
        probe(path)  # cached: the harness's own probe of the file costs nothing more
    except BaseException:
        stack.close()
        raise
    return stack, path
