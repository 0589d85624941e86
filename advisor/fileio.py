"""Every file advisor reads or writes goes through here: one reader, one writer, one lock.

Reading (`read_input_bytes`, `read_input_text`, `load_toml`, `load_json`): only a regular file is
read. The file is `stat`ed before it is opened, and opened with O_NONBLOCK, so a FIFO, a device
(`/dev/zero`), a socket or a directory is refused at once ("not a regular file") instead of hanging
or reading until memory runs out; a size cap bounds what is read even if the file grows meanwhile;
parsed documents nested deeper than `MAX_DEPTH` are refused (the parsers themselves raise
RecursionError from ~500 levels). Every problem is an `InputError` naming the file.

Writing (`atomic_write_text`, `atomic_write_bytes`): the data go to a temporary file in the same
folder, are fsynced and renamed over the target (rename is atomic on POSIX), so a crash, a signal or
a full disk leaves the old file intact. Only a regular file is ever replaced: `--plot /dev/null`
is refused instead of renaming a PNG over the device node. A new file gets the mode the umask
gives (0666 & ~umask, as `open()` would), a replaced file keeps its mode (and, as root, its owner).
`signals_deferred()` holds off SIGINT/SIGTERM while a finished result is being made durable.

A symbolic link as the target is refused (the rename would silently replace the link with a
regular file). Temporary copies are named `.NAME.HOST.PID.XXXX.tmp`; one left by a writer that was
killed (SIGKILL: no handler runs) is removed by the next write of the same file on that host.

Locking (`exclusive_lock`): an advisory flock on `PATH.lock`, opened with O_NOFOLLOW (a planted
symlink cannot make advisor create or truncate a file elsewhere) and refused when not a regular
file, so two calibrations cannot write the same file at once. The target is checked before the
lock file is created (no `/dev/null.lock`, no `DIR.lock`), and the lock file is removed when the
write is done: none is left beside the output. One left by a killed process is harmless (the
kernel releases flocks when their holder dies) and is removed by the next run that takes it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from advisor.errors import InputError

#: Largest spec, calibration file or result.json read (bytes). The largest checked-in calibration
#: is ~20 KB; 64 MiB leaves room for long runs and is far below what would exhaust memory.
MAX_INPUT_BYTES = 64 * 2**20

#: Largest measurement CSV read (bytes): a 1M-row CSV of six columns is ~40 MB.
MAX_CSV_BYTES = 1024 * 2**20

#: Deepest nesting of tables/arrays accepted in a TOML or JSON input. advisor's own formats nest
#: at most 4 deep (a calibration's runs[i].step_seconds[j]); tomllib raises RecursionError at ~500.
MAX_DEPTH = 32

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _read_error(path: Path, exc: OSError) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError.at(path, "", "no such file")
    if isinstance(exc, NotADirectoryError):
        return InputError.at(path, "", "no such file (a part of the path is not a folder)")
    return InputError.at(path, "", f"cannot read: {exc.strerror or exc}")


def _not_regular(path: Path, mode: int, what: str) -> InputError:
    return InputError.at(path, "", f"not a regular file ({_kind(mode)}); expected {what}")


def read_input_bytes(path: str | Path, what: str = "a file", max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes`; InputError for anything else."""
    path = Path(path)
    if not str(path):
        raise InputError.at("''", "", f"empty path; expected {what}")
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st.st_mode, what)
        if st.st_size > max_bytes:
            raise InputError.at(path, "", f"too large: {st.st_size:,} bytes, at most {max_bytes:,} are read for {what}")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _read_error(path, exc) from None
    try:
        st = os.fstat(fd)  # the file opened may not be the one stat'ed (replaced in between)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st.st_mode, what)
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise _read_error(path, exc) from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise InputError.at(path, "", f"too large: more than {max_bytes:,} bytes for {what}")
    return b"".join(chunks)


def read_input_text(path: str | Path, what: str = "a text file", max_bytes: int = MAX_INPUT_BYTES) -> str:
    """UTF-8 text of a regular file; a leading byte-order mark (spreadsheets' "CSV UTF-8") is dropped."""
    raw = read_input_bytes(path, what, max_bytes)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError.at(path, "", f"not UTF-8 text (byte {exc.start})") from None


def distinct_files(paths: list) -> tuple[list, list[str]]:
    """`paths` with a file given twice (the same file by device and inode, under any name: a
    symlink, `./x`, a shell glob that overlaps another) kept once, and a note for each one left
    out. Every command that reads several files of measurements (imported logs, `--calibration`
    files) passes them through here: one file's rows must not count twice (doubled runs halved the
    bootstrap's spread and narrowed every interval)."""
    kept, notes, seen = [], [], {}
    for path in paths:
        try:
            st = os.stat(path)
            key: tuple = (st.st_dev, st.st_ino)
        except OSError:  # the reader names the problem
            key = ("unreadable", str(path))
        if key in seen:
            notes.append(f"{path}: the same file as {seen[key]}, given twice; read once")
            continue
        seen[key] = path
        kept.append(path)
    return kept, notes


def nesting_depth(value: Any) -> int:
    """How deep tables and arrays nest in a parsed document (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def _check_depth(path: Path, data: Any) -> Any:
    if nesting_depth(data) > MAX_DEPTH:
        raise InputError.at(path, "", f"nested more than {MAX_DEPTH} levels deep")
    return data


def load_toml(path: str | Path, what: str = "a TOML file") -> dict:
    """Read and parse a TOML input; a syntax error names line and column."""
    import re
    import tomllib

    path = Path(path)
    text = read_input_text(path, what)
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise InputError.at(path, "", f"nested more than {MAX_DEPTH} levels deep") from None
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"line {m.group(1)}, column {m.group(2)}" if m else "end of file"
        what_went_wrong = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", msg)
        raise InputError.at(path, "", f"{where}: malformed TOML: {what_went_wrong}") from None
    except ValueError:  # int() of an integer over Python's 4,300-digit limit, inside the parser
        raise InputError.at(path, "", f"a number of more than {sys.get_int_max_str_digits():,} digits") from None
    return _check_depth(path, data)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _RepeatedKey(key)
        seen[key] = value
    return seen


class _RepeatedKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def load_json(path: str | Path, what: str = "a JSON file") -> Any:
    """Read and parse a JSON input: repeated keys, NaN/Infinity and deep nesting are refused."""
    path = Path(path)
    text = read_input_text(path, what)

    def constant(name: str) -> Any:
        raise InputError.at(path, "", f"malformed JSON: {name} is not a number JSON allows")

    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=constant)
    except RecursionError:
        raise InputError.at(path, "", f"nested more than {MAX_DEPTH} levels deep") from None
    except _RepeatedKey as exc:
        raise InputError.at(path, exc.key, "key repeated in one object") from None
    except json.JSONDecodeError as exc:
        raise InputError.at(path, "", f"malformed JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except ValueError:  # int() of an integer over Python's 4,300-digit limit, inside the parser
        raise InputError.at(path, "", f"a number of more than {sys.get_int_max_str_digits():,} digits") from None
    return _check_depth(path, data)


def _umask() -> int:
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


_UMASK_LOCK = threading.Lock()


def check_output_target(path: str | Path) -> None:
    """Refuse, before any work, a target the writer would refuse: a directory, a special file, or a
    symbolic link (the rename would replace the link itself with a regular file, silently)."""
    path = Path(path)
    if not str(path):
        raise InputError.at("''", "", "empty path; expected a file to write")
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise InputError.at(path, "", f"is a symbolic link (to {os.readlink(path)}); advisor writes by rename, "
                                "which would replace the link with a file: give the link's target instead")
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError.at(path, "", f"cannot write: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        hint = " (an empty path reads as '.')" if str(path) == "." else ""
        raise InputError.at(path, "", f"is a directory; expected the path of a file to write{hint}")
    if not stat.S_ISREG(st.st_mode):
        raise InputError.at(path, "", f"not a regular file ({_kind(st.st_mode)}); advisor only replaces regular files")


def check_output_folder(path: str | Path) -> None:
    """Refuse, before any work, a file whose folder does not exist or cannot be written: for the
    writers that create no folder (--plot, --html), checked for every output before the first is
    written, so a command never exits 2 having written one of them."""
    path = Path(path)
    check_output_target(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError.at(path, "", f"cannot write: no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError.at(path, "", f"cannot write: folder {folder} is not writable")


def atomic_write_text(path: str | Path, text: str) -> None:
    """Replace `path` with `text` atomically; the old file is untouched on any failure."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace the regular file `path` with `data` atomically (a PNG plot, a TOML file); the old
    file is untouched on any failure; a new file gets 0666 & ~umask, a replaced one keeps its mode."""
    path = Path(path)
    check_output_target(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        old = os.stat(path)
    except OSError:
        old = None
    tmp = _temp_copy(path, folder, data, old)
    try:
        check_output_target(path)  # became a special file meanwhile: still never replace it
        os.replace(tmp, path)
        _fsync_folder(folder)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError.at(path, "", f"cannot write: {exc.strerror}") from None
        raise


def write_new_bytes(path: str | Path, data: bytes, exists: str = "exists; advisor never overwrites it") -> None:
    """Create `path` with `data` only if it does not exist, never half-written: a temporary file in
    the same folder (mode 0666 & ~umask), fsynced, then hard-linked to `path` (link(2) fails if
    `path` exists, even when another process created it a moment ago) and removed."""
    path = Path(path)
    check_output_target(path)
    folder = path.parent if str(path.parent) else Path(".")
    tmp = _temp_copy(path, folder, data, None)
    try:
        os.link(tmp, path)
        _fsync_folder(folder)
    except FileExistsError:
        raise InputError.at(path, "", exists) from None
    except OSError as exc:
        raise InputError.at(path, "", f"cannot write: {exc.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _host() -> str:
    """This host's name as temporary copies carry it: no '/' or '.', at most 32 characters."""
    return (socket.gethostname().replace("/", "_").replace(".", "_") or "host")[:32]


def _temp_prefix(path: Path) -> str:
    """`.NAME.HOST.PID.`: whose temporary copy it is, so a later write can tell a dead writer's."""
    return f".{path.name}.{_host()}.{os.getpid()}."


def _sweep_temp_copies(path: Path, folder: Path) -> None:
    """Remove the temporary copies of `path` that writers on this host left when killed (SIGKILL
    leaves no chance to clean up): names from `_temp_prefix` whose process no longer exists."""
    head, host = f".{path.name}.", _host()
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(head) and e.name.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        parts = name[len(head):-len(".tmp")].rsplit(".", 2)
        if len(parts) != 3 or parts[0] != host or not parts[1].isascii() or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid() or _alive(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(folder / name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, as another user's process
        return True
    return True


def _temp_copy(path: Path, folder: Path, data: bytes, old: os.stat_result | None) -> str:
    """`data` in a new temporary file beside `path`, fsynced: mode 0666 & ~umask (mkstemp's 0600
    would hide it from the team), or the replaced file's mode and (as root) owner. Its name. The
    copies a killed writer left of the same file are removed first (`_sweep_temp_copies`)."""
    _sweep_temp_copies(path, folder)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=folder)
    except OSError as exc:
        raise InputError.at(path, "", f"cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode) if old else 0o666 & ~_umask())
            if old is not None and os.geteuid() == 0:
                with contextlib.suppress(OSError):
                    os.fchown(f.fileno(), old.st_uid, old.st_gid)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as exc:  # a full disk, or a signal mid-write: no temporary file is left
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError.at(path, "", f"cannot write: {exc.strerror}") from None
        raise
    return tmp


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (a crash right after it must not bring the old file back)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends; one that arrived meanwhile is acted on then.

    Wrap the steps that make a finished result durable *and recorded as such* (write the file,
    note it as saved), so an interrupt lands before or after them, never in between. The Python
    handlers are swapped for one that only records the signal (Python runs handlers in the main
    thread whichever thread the kernel delivered to: a signal mask would not do, since numpy's
    and torch's worker threads leave the signals unblocked)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum)) for sig in held}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            _deliver(pending[0], previous[pending[0]])


def _deliver(signum: int, handler) -> None:
    """Act on a held signal as its own handler would have."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)  # the default action (terminate), now that the write is done


@contextlib.contextmanager
def exclusive_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive, non-blocking lock on `PATH.lock`; refuse if another process has it. The
    target is checked first (a directory or device gets no `.lock` beside it), and the lock file is
    removed when the block ends, so none is left beside the output (module docstring)."""
    path = Path(path)
    check_output_target(path)
    lock_path = path.with_name(path.name + ".lock")
    for _ in range(3):  # the file opened was removed by its holder meanwhile: open the new one
        fd = _open_lock(path, lock_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise InputError.at(path, "", "another advisor process is writing this file; wait for it or choose "
                                "another --out") from None
        if _same_file(fd, lock_path):
            break
        os.close(fd)
    else:
        raise InputError.at(path, "", "another advisor process is writing this file; wait for it or choose "
                            "another --out")
    try:
        yield
    finally:
        # Removed while still held: a process that opened it meanwhile finds it unlinked once it
        # gets the lock (`_same_file`) and opens the path anew, so two never hold "the" lock.
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        os.close(fd)


def _open_lock(path: Path, lock_path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(lock_path, flags, 0o666 & ~_umask())
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError.at(path, "", f"lock file {lock_path.name} is a symbolic link; remove it "
                                "(advisor never follows links for its lock)") from None
        if exc.errno == errno.ENOENT and not lock_path.parent.is_dir():  # the words --plot and --html use
            raise InputError.at(path, "", f"cannot write: no folder {lock_path.parent}") from None
        raise InputError.at(path, "", f"cannot create lock file {lock_path.name}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError.at(path, "", f"lock file {lock_path.name} is not a regular file ({_kind(mode)}); remove it")
    return fd


def _same_file(fd: int, lock_path: Path) -> bool:
    """Whether the open lock file is still the one at `lock_path` (not unlinked by its last holder)."""
    try:
        st = os.stat(lock_path, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
