"""advisor.fileio, the one reader and the one writer: special files refused (never read, never
replaced), sizes and depth capped, modes honoured, locks that do not follow links."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time

import pytest

from advisor.errors import InputError
from advisor.fileio import (
    MAX_DEPTH,
    atomic_write_bytes,
    exclusive_lock,
    load_json,
    load_toml,
    read_input_bytes,
    read_input_text,
)


def _special_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")
    return {"fifo": (fifo, "a FIFO"), "socket": (sock_path, "a socket"),
            "dev-zero": ("/dev/zero", "a character device"),
            "dev-null": ("/dev/null", "a character device"), "directory": (tmp_path, "a directory"),
            "link-to-dev-zero": (link, "a character device")}, sock


def test_reader_refuses_every_special_file_at_once(tmp_path):
    cases, sock = _special_files(tmp_path)
    try:
        for name, (path, kind) in cases.items():
            start = time.monotonic()
            with pytest.raises(InputError) as err:
                read_input_bytes(path, "a TOML file")
            assert time.monotonic() - start < 1, name  # a FIFO with no writer must not block
            assert err.value.lines() == [f"{path}: not a regular file ({kind}); expected a TOML file"], name
    finally:
        sock.close()


def test_reader_caps_size_and_reports_missing(tmp_path):
    big = tmp_path / "big.toml"
    big.write_bytes(b"a" * 101)
    with pytest.raises(InputError, match="too large: 101 bytes, at most 100"):
        read_input_bytes(big, "a TOML file", max_bytes=100)
    assert read_input_bytes(big, max_bytes=101) == b"a" * 101
    with pytest.raises(InputError, match="no such file"):
        read_input_bytes(tmp_path / "absent.toml")
    with pytest.raises(InputError, match="a part of the path is not a folder"):
        read_input_bytes(big / "x.toml")


def test_text_drops_a_bom_and_refuses_other_encodings(tmp_path):
    p = tmp_path / "a.csv"
    p.write_bytes(b"\xef\xbb\xbfgpus\n")
    assert read_input_text(p) == "gpus\n"
    p.write_bytes(b"gpus\xff\n")
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 4\)"):
        read_input_text(p)


@pytest.mark.parametrize("text", [
    "a = " + "[" * 600 + "]" * 600,                      # tomllib itself raises RecursionError here
    "a = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
    "a = " + "{b = " * 40 + "1" + "}" * 40,
    "a" + ".b" * 2000 + " = 1",                           # dotted keys: deep tables without recursion
])
def test_deep_toml_is_refused(tmp_path, text):
    p = tmp_path / "deep.toml"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        load_toml(p)
    assert err.value.lines() == [f"{p}: nested more than {MAX_DEPTH} levels deep"]


@pytest.mark.parametrize("text, message", [
    ("[" * 5000 + "]" * 5000, f"nested more than {MAX_DEPTH} levels deep"),
    ('{"gpus": 1, "gpus": 2}', "gpus: key repeated in one object"),
    ('{"a": NaN}', "malformed JSON: NaN is not a number JSON allows"),
    ('{"a": Infinity}', "malformed JSON: Infinity is not a number JSON allows"),
    ('{"a": 1', "malformed JSON: Expecting ',' delimiter at line 1, column 8"),
    ("", "malformed JSON: Expecting value at line 1, column 1"),
])
def test_json_checks(tmp_path, text, message):
    p = tmp_path / "result.json"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        load_json(p)
    assert err.value.lines() == [f"{p}: {message}"]


@pytest.mark.parametrize("target", ["/dev/null", "fifo", "directory"])
def test_writer_never_replaces_a_special_file(tmp_path, target):
    path = {"/dev/null": "/dev/null", "fifo": tmp_path / "fifo", "directory": tmp_path / "d"}[target]
    if target == "fifo":
        os.mkfifo(path)
    if target == "directory":
        path.mkdir()
    before = os.stat(path)
    with pytest.raises(InputError, match=r"not a regular file|is a directory"):
        atomic_write_bytes(path, b"PNG")
    after = os.stat(path)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_new_files_follow_the_umask_and_replaced_files_keep_their_mode(tmp_path):
    code = ("import os, sys; from advisor.fileio import atomic_write_text; os.umask(int(sys.argv[2], 8)); "
            "atomic_write_text(sys.argv[1], 'x')")
    for umask, mode in (("022", 0o644), ("002", 0o664), ("077", 0o600)):
        p = tmp_path / f"new-{umask}.toml"
        subprocess.run([sys.executable, "-c", code, str(p), umask], check=True, env={**os.environ})
        assert stat.S_IMODE(os.stat(p).st_mode) == mode, umask
    shared = tmp_path / "team.toml"
    shared.write_text("old")
    shared.chmod(0o664)
    subprocess.run([sys.executable, "-c", code, str(shared), "077"], check=True)
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o664 and shared.read_text() == "x"


def test_lock_never_follows_a_planted_symlink(tmp_path):
    elsewhere = tmp_path / "elsewhere" / "created-by-advisor"
    elsewhere.parent.mkdir()
    out = tmp_path / "cal.toml"
    (tmp_path / "cal.toml.lock").symlink_to(elsewhere)
    with pytest.raises(InputError) as err, exclusive_lock(out):
        pass
    assert err.value.lines() == [f"{out}: lock file cal.toml.lock is a symbolic link; remove it "
                                 "(advisor never follows links for its lock)"]
    assert not elsewhere.exists()


def test_lock_refuses_a_fifo_and_accepts_a_stale_lock_file(tmp_path):
    out = tmp_path / "cal.toml"
    os.mkfifo(tmp_path / "cal.toml.lock")
    with (pytest.raises(InputError, match=r"lock file cal.toml.lock is not a regular file \(a FIFO\); remove it"),
          exclusive_lock(out)):
        pass
    os.unlink(tmp_path / "cal.toml.lock")
    # A lock file whose holder was SIGKILLed: the kernel released its flock, the file stays.
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], "
                               "os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); print(1, flush=True); "
                               "time.sleep(60)", str(tmp_path / "cal.toml.lock")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "1"
    with pytest.raises(InputError, match="another advisor process is writing this file"), exclusive_lock(out):
        pass
    holder.kill()
    holder.wait()
    with exclusive_lock(out):
        pass


def test_signals_are_held_during_the_block_even_with_other_threads():
    """numpy/torch start threads that leave SIGTERM unblocked: the hold must not rely on a mask."""
    import signal
    import threading

    from advisor.fileio import signals_deferred

    seen = []
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)  # a thread the kernel may deliver the signal to
    worker.start()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            assert seen == []  # held: the write in here finishes first
        assert seen == [signal.SIGTERM]  # delivered once the block ends
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop.set()
        worker.join()


def test_a_held_default_sigterm_still_terminates_after_the_block(tmp_path):
    code = ("import os, signal, sys; from advisor.fileio import signals_deferred, atomic_write_text\n"
            "with signals_deferred():\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    atomic_write_text(sys.argv[1], 'whole')\n"
            "print('not reached')\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f.toml")], capture_output=True, text=True)
    assert r.returncode == -15 and "not reached" not in r.stdout
    assert (tmp_path / "f.toml").read_text() == "whole"
