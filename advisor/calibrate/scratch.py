"""Temporary result folders of local calibration runs (`advisor-calibrate-NAME-N-*` in the temp dir).

Each count's ranks write into a fresh folder. Its owner (the CLI process) removes it once the count
is saved, interrupted or failed (a failed count's rank logs move beside the calibration file, to
`OUT.logs/`, named in the message). A temp folder is kept only when a message names it: a finished
measurement the disk refused to store (`--collect` adds it later), or a failed count's logs when
`OUT.logs/` cannot be written; such a folder is marked `.kept`. A folder whose owner died without
cleaning up (SIGKILL, power loss) is found by the
next calibration through its `.owner` file (pid and process start time, so a reused pid does not
count as alive) and removed; leftovers of older advisor versions without a marker are named, not
guessed at.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from advisor.errors import InputError
from advisor.fileio import load_json

PREFIX = "advisor-calibrate-"
OWNER = ".owner"
KEPT = ".kept"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _alive(owner: dict) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    started = owner.get("started")
    return started is None or _start_time(pid) in (None, started)


def new_folder(name: str, gpus: int) -> Path:
    """A fresh folder for one count's results, marked with this process as its owner."""
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{name}-{gpus}-"))
    except OSError as exc:
        raise InputError.at(tempfile.gettempdir(), "", f"cannot create a result folder for N={gpus}: "
                            f"{exc.strerror} (set TMPDIR to a writable folder)") from None
    try:
        (folder / OWNER).write_text(json.dumps({"pid": os.getpid(), "started": _start_time(os.getpid())}))
    except OSError as exc:
        remove(folder)
        raise InputError.at(folder, "", f"cannot write: {exc.strerror} (set TMPDIR to a writable folder)") from None
    return folder


def keep(folder: Path) -> Path:
    """Mark a folder as kept on purpose (a message names it): the next run's sweep leaves it."""
    with contextlib.suppress(OSError):
        (folder / KEPT).write_text("named in an advisor message; remove when done\n")
    return folder


def move_logs(folder: Path, out: Path, gpus: int) -> Path:
    """A failed count's rank logs and error lines, moved beside the calibration file
    (`OUT.logs/N<gpus>-<UTC time>/`) so no temporary folder stays behind; if that folder cannot be
    written, the temp folder itself is kept (marked) instead. Returns where the logs are."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = out.with_name(out.name + ".logs") / f"N{gpus}-{stamp}"
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for item in folder.iterdir():
            if item.suffix in (".log", ".error") and item.is_file() and not item.is_symlink():
                shutil.copyfile(item, dest / item.name)
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        return keep(folder)
    remove(folder)
    return dest


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def sweep() -> tuple[list[Path], list[Path]]:
    """Remove folders whose owner died without cleaning up; return (removed, unowned leftovers)."""
    removed, unowned = [], []
    root = Path(tempfile.gettempdir())
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith(PREFIX) and p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed, unowned
    for folder in candidates:
        try:
            mine = folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if not mine or (folder / KEPT).exists():
            continue
        try:
            owner = load_json(folder / OWNER, "an owner file")
        except InputError:
            unowned.append(folder)
            continue
        if isinstance(owner, dict) and not _alive(owner):
            remove(folder)
            removed.append(folder)
    return removed, unowned
