"""The system calls bubblewrap's child may not make: a classic BPF seccomp program, compiled here (no libseccomp).

Refused (``EPERM``): a new namespace of any kind (``unshare``, ``clone``), since a user namespace of its own makes the
harness root there, where it mounts a writable tmpfs over the read-only file system, memory outside every limit of its
own; System V shared memory and message queues (``shmget``, ``msgget``), kept by the kernel after the process detaches
them, so outside its address-space limit; and memory files (``memfd_create``, ``memfd_secret``), whose pages written
with ``write`` are never mapped, so outside it too (a file each up to ``RLIMIT_FSIZE``: forty of them held 640 MB beside
a 1 GB limit, times every process the harness may start). ``clone3`` answers ``ENOSYS`` (its flags are behind a pointer
a filter cannot read), and the C library falls back to ``clone`` for threads and processes. A system call of another ABI
(32-bit ``int 0x80``, x32) kills the process. Only x86-64 and AArch64 are known; elsewhere there is no filter.
"""

from __future__ import annotations

import os
import platform
import struct

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
"""cBPF opcodes: load a word of ``seccomp_data``; jump if equal, greater or equal, any bit set; return."""
_NR, _ARCH, _ARG0 = 0, 4, 16
"""Offsets in ``struct seccomp_data``: the call's number, its ABI, its first argument (low word, little-endian)."""
_ALLOW, _ERRNO, _KILL = 0x7FFF0000, 0x00050000, 0x80000000
EPERM, ENOSYS = 1, 38
NAMESPACE_FLAGS = 0x7E020000
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET."""


class _Abi:
    def __init__(self, arch: int, unshare: int, clone: int, clone3: int, refused: tuple[int, ...],
                 below: int | None = None) -> None:
        self.arch, self.unshare, self.clone, self.clone3 = arch, unshare, clone, clone3
        self.refused = refused
        """``shmget``, ``msgget``, ``memfd_create``, ``memfd_secret``."""
        self.below = below
        """Calls numbered from here are another ABI's (x32 on x86-64)."""


_ABIS = {
    "x86_64": _Abi(0xC000003E, unshare=272, clone=56, clone3=435, refused=(29, 68, 319, 447), below=0x40000000),
    "aarch64": _Abi(0xC00000B7, unshare=97, clone=220, clone3=435, refused=(194, 186, 279, 447)),
}


def program(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine (``struct sock_filter`` array), or None where its ABI is not known."""
    abi = _ABIS.get(machine or platform.machine())
    if abi is None:
        return None
    code: list[tuple[int, str | int, str | int, int]] = [(_LD_ABS, 0, 0, _ARCH), (_JEQ, 0, "kill", abi.arch),
                                                         (_LD_ABS, 0, 0, _NR)]
    if abi.below is not None:
        code.append((_JGE, "kill", 0, abi.below))
    code += [(_JEQ, "enosys", 0, abi.clone3), *((_JEQ, "eperm", 0, nr) for nr in abi.refused),
             (_JEQ, "flags", 0, abi.unshare), (_JEQ, "flags", 0, abi.clone), (_RET, 0, 0, _ALLOW)]
    labels = {"flags": len(code)}
    code += [(_LD_ABS, 0, 0, _ARG0), (_JSET, "eperm", 0, NAMESPACE_FLAGS), (_RET, 0, 0, _ALLOW)]
    for label, ret in (("eperm", _ERRNO | EPERM), ("enosys", _ERRNO | ENOSYS), ("kill", _KILL)):
        labels[label] = len(code)
        code.append((_RET, 0, 0, ret))

    def offset(at: int, target: str | int) -> int:
        return target if isinstance(target, int) else labels[target] - at - 1

    return b"".join(struct.pack("=HBBI", op, offset(i, jt), offset(i, jf), k)
                    for i, (op, jt, jf, k) in enumerate(code))


def filter_fd() -> int | None:
    """The read end of a pipe holding :func:`program`, for ``bwrap --seccomp FD`` (None: no filter here).

    The program is a few hundred bytes, far below a pipe's buffer, so the write never waits; the caller closes it.
    """
    compiled = program()
    if compiled is None:
        return None
    read, write = os.pipe()
    try:
        os.write(write, compiled)
    finally:
        os.close(write)
    return read
