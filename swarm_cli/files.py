"""Files swarm writes besides the ledger (--trace, --plan-out, --report): opened safely.

Each is opened without following a symbolic link, in the same call that
creates it, with the mode the umask gives; a FIFO or a device that nobody
reads is refused instead of hanging the run.
"""

from __future__ import annotations

import errno
import os
from typing import IO

# A write that found no room: a full disk, a quota, a file-size limit, a device error.
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def create_fd(path: str, *, truncate: bool = True, exclusive: bool = False) -> int:
    """A file descriptor to write ``path``; raises ``OSError`` (ELOOP for a symbolic link)."""
    flags = _FLAGS | (os.O_TRUNC if truncate else 0) | (os.O_EXCL if exclusive else 0)
    fd = os.open(path, flags, 0o666)
    os.set_blocking(fd, True)
    return fd


def create_text(path: str) -> IO[str]:
    """``path`` opened for writing text from the start, as :func:`create_fd` opens it."""
    fd = create_fd(path)
    try:
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise
