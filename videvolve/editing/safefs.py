"""Workspace files opened without ever following a link.

An editor command runs beside the tools and may replace a folder that was checked a moment ago by a link to
anywhere (``/proc/self/mountinfo`` tells it the host's paths). So the trusted side never opens a workspace path by
its name: it walks from the workspace's own descriptor one component at a time with ``O_NOFOLLOW``, and reads or
writes a regular file only through the descriptor it opened and checked.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from videvolve.errors import VidevolveError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_ENTRIES = 5000
"""Files and folders a copied tree may hold."""
MAX_DEPTH = 64
"""Folder levels a walk enters (a strict walk refuses a deeper folder)."""
MAX_OPEN = 64
"""Descriptors :func:`remove_tree` holds at once, one per level."""
NAME_MAX = 255
"""Bytes of one name (Linux's): a longer one is refused as a path, not raised as the file system's error."""
PATH_ERRORS = (errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.EINVAL)
"""What opening a name the editor chose may fail with besides a link, a file or nothing there: its refusal."""


class PathRefused(VidevolveError, PermissionError):
    """A workspace path that cannot be used: missing, through a link, not a regular file or folder, too large."""


def parts(rel: str) -> list[str]:
    """The components of a workspace-relative path (refused if it climbs out)."""
    out = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or "\\" in rel or ".." in out:
        raise PathRefused(f"path {rel!r} leaves the workspace")
    try:
        too_long = any(len(p.encode("utf-8")) > NAME_MAX for p in out)
    except UnicodeEncodeError:
        raise PathRefused(f"path {rel[:80]!r} is not text UTF-8 can hold") from None
    if "\x00" in rel or too_long:
        raise PathRefused(f"path {rel[:80]!r} holds a NUL byte or a name over {NAME_MAX} bytes")
    return out


@contextmanager
def open_dir(root: Path, rel: str, create: bool = False) -> Iterator[int]:
    """A descriptor of a folder of the workspace reached without following links (``create``: making it)."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in parts(rel):
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PathRefused(f"path {rel!r} goes through a symbolic link or a file") from None
                if exc.errno == errno.ENOENT:
                    raise PathRefused(f"no folder {rel!r} in the workspace (list_files shows what there is)") from None
                if exc.errno in PATH_ERRORS:
                    raise PathRefused(f"path {rel!r}: {exc.strerror}") from None
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _open_file(dir_fd: int, name: str, flags: int, where: str) -> int:
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathRefused(f"{where} is a symbolic link") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            raise PathRefused(f"{where} is not a regular file") from None
        if exc.errno == errno.ENOENT:
            raise PathRefused(f"no file {where!r} in the workspace (list_files shows what there is)") from None
        if exc.errno in PATH_ERRORS:
            raise PathRefused(f"{where}: {exc.strerror}") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PathRefused(f"{where} is not a regular file")
    return fd


def _split(rel: str) -> tuple[str, str]:
    names = parts(rel)
    if not names:
        raise PathRefused("a file path is needed")
    return "/".join(names[:-1]), names[-1]


def read_bytes(root: Path, rel: str, limit: int | None = None) -> bytes:
    """A regular file's bytes (refused over ``limit`` bytes, before reading them)."""
    folder, name = _split(rel)
    with open_dir(root, folder) as d, os.fdopen(_open_file(d, name, os.O_RDONLY, rel), "rb") as fh:
        if limit is not None and os.fstat(fh.fileno()).st_size > limit:
            raise PathRefused(f"{rel} is larger than {limit} bytes")
        return fh.read()


def write_bytes(root: Path, rel: str, data: bytes, append: bool = False) -> None:
    """Write (or append to) a regular file, making its folders."""
    folder, name = _split(rel)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
    with open_dir(root, folder, create=True) as d, os.fdopen(_open_file(d, name, flags, rel), "wb") as fh:
        if not append:
            fh.truncate(0)  # only once it is known to be a regular file of the workspace
        fh.write(data)


def _entries(dir_fd: int) -> list[os.DirEntry[str]]:
    with os.scandir(dir_fd) as it:
        return sorted(it, key=lambda e: e.name)


def walk(dir_fd: int, prefix: str = "", strict: bool = True) -> Iterator[tuple[str, os.DirEntry[str], int]]:
    """(relative path, entry, its folder's descriptor) of everything under a folder, sorted, never through a link.

    ``strict``: a link, a special file or a folder deeper than :data:`MAX_DEPTH` is refused; otherwise a link is
    listed and not entered, and neither is a folder at that depth. Iterative: one descriptor per level, no recursion.
    """
    stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = [(dir_fd, prefix, iter(_entries(dir_fd)))]
    try:
        while stack:
            fd, pre, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                if stack:
                    os.close(fd)
                continue
            rel, is_dir = f"{pre}{entry.name}", entry.is_dir(follow_symlinks=False)
            if strict and (entry.is_symlink() or not (is_dir or entry.is_file(follow_symlinks=False))):
                raise PathRefused(f"{rel} is a symbolic link" if entry.is_symlink() else f"{rel} is not a regular file")
            yield rel, entry, fd
            if not is_dir:
                continue
            if len(stack) >= MAX_DEPTH:
                if strict:
                    raise PathRefused(f"{rel} is more than {MAX_DEPTH} folders deep")
                continue
            try:
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if strict or exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    raise PathRefused(f"{rel} changed into a link while it was read") from None
                continue
            try:
                stack.append((sub, rel + "/", iter(_entries(sub))))
            except BaseException:
                os.close(sub)
                raise
    finally:
        for fd, _, _ in stack[1:]:
            os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it, at any depth, never through a link (a link itself is removed).

    Iterative, with at most :data:`MAX_OPEN` descriptors: a folder deeper than that is first moved up to the top
    folder, so a tree of any depth goes without recursion or running out of descriptors.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        path.unlink()
        return
    parent = os.open(path.parent, DIR_FLAGS)
    try:
        remove_tree_at(parent, path.name)
    finally:
        os.close(parent)


def remove_tree_at(parent_fd: int, name: str) -> None:
    """:func:`remove_tree` of the folder ``name`` in the folder open as ``parent_fd``."""
    top = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    stack: list[tuple[int, str, list[str]]] = []
    try:
        stack.append((top, name, _clear(top)))
        while stack:
            fd, here, subs = stack[-1]
            if not subs:
                stack.pop()
                os.close(fd)
                with suppress(FileNotFoundError):
                    os.rmdir(here, dir_fd=stack[-1][0] if stack else parent_fd)
                continue
            sub = subs.pop()
            if len(stack) >= MAX_OPEN:  # too deep to hold a descriptor per level: move it up to the top folder
                moved = f".removing-{secrets.token_hex(8)}"
                os.rename(sub, moved, src_dir_fd=fd, dst_dir_fd=top)
                stack[0][2].append(moved)
                continue
            try:
                sub_fd = os.open(sub, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # became a link or a file: remove that
                    os.unlink(sub, dir_fd=fd)
                    continue
                if exc.errno == errno.ENOENT:
                    continue
                raise
            try:
                stack.append((sub_fd, sub, _clear(sub_fd)))
            except BaseException:
                os.close(sub_fd)
                raise
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _clear(dir_fd: int) -> list[str]:
    """Remove everything in a folder but its folders; their names."""
    with suppress(OSError):
        os.fchmod(dir_fd, 0o700)  # a folder left without write permission
    folders = []
    for entry in _entries(dir_fd):
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry.name)
        else:
            with suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=dir_fd)
    return folders


def copy_tree(root: Path, rel: str, dest: Path | None, limit: int, text: tuple[str, ...]) -> None:
    """Copy a workspace folder of regular files and folders to ``dest`` (None: only check it).

    Refused with the reason for a link, a special file, a file over ``limit`` bytes, a ``text`` file that is not
    UTF-8, or more than :data:`MAX_ENTRIES` entries.
    """
    with open_dir(root, rel) as top:
        for n, (path, entry, dir_fd) in enumerate(walk(top, f"{rel}/")):
            if n >= MAX_ENTRIES:
                raise PathRefused(f"{rel}/ holds more than {MAX_ENTRIES} files and folders")
            inner = path.removeprefix(f"{rel}/")
            if entry.is_dir(follow_symlinks=False):
                if dest is not None:
                    (dest / inner).mkdir(parents=True, exist_ok=True)
                continue
            with os.fdopen(_open_file(dir_fd, entry.name, os.O_RDONLY, path), "rb") as fh:
                if os.fstat(fh.fileno()).st_size > limit:
                    raise PathRefused(f"{path} is larger than {limit} bytes")
                data = fh.read(limit + 1)
            if Path(inner).suffix in text:
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise PathRefused(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
            if dest is not None:
                (dest / inner).parent.mkdir(parents=True, exist_ok=True)
                (dest / inner).write_bytes(data)


@contextmanager
def snapshot(root: Path, rel: str, limit: int, text: tuple[str, ...]) -> Iterator[Path]:
    """A private copy of a workspace folder, as :func:`copy_tree` takes it, for as long as the block runs."""
    with tempfile.TemporaryDirectory(prefix="vv-snapshot-") as tmp:
        dest = Path(tmp) / Path(rel).name
        dest.mkdir()
        copy_tree(root, rel, dest, limit, text)
        yield dest
