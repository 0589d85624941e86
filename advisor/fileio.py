"""Writing files so that nothing is ever half-written, and one writer at a time.

`atomic_write_text` writes to a temporary file in the same folder, fsyncs it and renames it over
the target (rename is atomic on POSIX), so a crash, Ctrl-C or full disk leaves the old file intact.
`exclusive_lock` takes an advisory flock on `PATH.lock` so two calibrations cannot write the
same file at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path
from typing import Iterator

from advisor.errors import InputError


def atomic_write_text(path: str | Path, text: str) -> None:
    """Replace `path` with `text` atomically; the old file is untouched on any failure."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace `path` with `data` atomically (a PNG plot, a TOML file); the old file is untouched on any failure."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise InputError.at(path, "", f"cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError.at(path, "", f"cannot write: {exc.strerror}") from None
        raise


@contextlib.contextmanager
def exclusive_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive, non-blocking lock on `PATH.lock`; refuse if another process has it."""
    path = Path(path)
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InputError.at(path, "", f"cannot create lock file {lock_path.name}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError.at(path, "", "another advisor process is writing this file; wait for it or choose another --out") from None
        yield
    finally:
        # The lock file stays: unlinking it would let a third process lock a fresh inode while a
        # second still holds the old one.
        os.close(fd)
