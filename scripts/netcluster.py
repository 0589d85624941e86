"""An emulated multi-node cluster on one Linux machine, for tests and benchmarks.

Each "node" is a network namespace with one veth link into a private Linux bridge. The link can be
capped with a token-bucket filter (``tc qdisc ... tbf``) in both directions: on the namespace end
of the veth (the node's upload) and on the bridge end (its download). The bridge has no address
and no uplink, so nothing sent inside the cluster can leave it. Optionally each node also gets a
CPU budget (a cgroup-v1 CFS quota), so that compute capacity grows with the number of nodes the
way it does on real hardware, even on a machine with two cores.

Why: the communication tax that jumps when a training job crosses a slower inter-node link is what
advisor predicts; with this testbed that physics is reproduced for real (real gloo traffic, real
bytes through a real rate limiter) without a cluster.

Needs root, ``ip`` (iproute2) and ``tc``. Nothing here imports advisor or torch.

Names carry a tag made of the creating process id and a random byte, so concurrent runs never
collide, and leftovers of a crashed run (whose process id is gone) are removed by the next run.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

PREFIX = "advnc"
"""Namespace names start with ``advnc-``; interface names with ``nc`` + a role letter."""

INTERFACE = "nc0"
"""Name of the cluster interface inside every node (the same in all, for GLOO_SOCKET_IFNAME)."""

NETNS_ETC = Path("/etc/netns")
"""`ip netns exec NAME` bind-mounts the files of /etc/netns/NAME/ over /etc/ (ip-netns(8))."""

CLONE_NEWUTS = 0x04000000
"""unshare(2) flag: a private hostname for each node's processes (<sched.h>)."""

CPU_CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
"""cgroup-v1 cpu controller mount (the layout of this machine; cgroup v2 is not delegated here)."""

CAPPED_SHARES = 16 * 1024
"""cpu.shares of a capped node: 16 default-weight tasks' worth (cgroup-v1 sched-design-CFS.rst)."""

_TAG_RE = re.compile(r"^(?:nc[bhp]|advnc-)([0-9a-f]{6})([0-9a-f]{2})")


class ClusterUnavailable(RuntimeError):
    """The machine cannot host an emulated cluster (not root, no iproute2, netns refused)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def unavailable_reason(cpu_budgets: bool = False) -> str | None:
    """Why an emulated cluster (with per-node CPU budgets if asked) cannot be built here, or None
    when it can (for pytest.skip)."""
    if os.name != "posix" or os.geteuid() != 0:
        return "emulated cluster needs root (network namespaces, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"emulated cluster needs `{tool}` (iproute2)"
    probe = f"{PREFIX}-probe-{os.getpid():x}-{random.randrange(1 << 16):04x}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip() or made.returncode}"
    _ip("netns", "del", probe, check=False)
    if cpu_budgets and not (CPU_CGROUP_ROOT / "cpu.cfs_quota_us").is_file():
        return f"CPU budgets need the cgroup-v1 cpu controller at {CPU_CGROUP_ROOT} (cgroup v2 is not supported yet)"
    return None


def cleanup_leftovers() -> list[str]:
    """Remove namespaces, links and cgroups left by earlier runs whose creating process is gone.

    Runs of other live processes are left alone (their tag names a live process id).
    Returns the names removed.
    """
    removed: list[str] = []

    def stale(name: str) -> bool:
        if name.startswith(f"{PREFIX}-probe-"):
            pid = int(name.split("-")[2], 16)
            return not _pid_alive(pid)
        match = _TAG_RE.match(name)
        return bool(match) and not _pid_alive(int(match.group(1), 16))

    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for line in listed:
        name = line.split(" ")[0].strip()
        if name and stale(name):
            _ip("netns", "del", name, check=False)
            removed.append(name)
    for folder in NETNS_ETC.glob(f"{PREFIX}-*") if NETNS_ETC.is_dir() else []:
        if stale(folder.name):
            _remove_etc(folder.name)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        if stale(name):
            _ip("link", "del", name, check=False)
            removed.append(name)
    if CPU_CGROUP_ROOT.is_dir():
        for group in CPU_CGROUP_ROOT.glob(f"{PREFIX}-*"):
            if stale(group.name) and _rmdir_cgroup(group):
                removed.append(str(group))
    return removed


def _remove_etc(namespace: str) -> None:
    folder = NETNS_ETC / namespace
    (folder / "hosts").unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def _rmdir_cgroup(group: Path) -> bool:
    """Remove a cgroup directory, retrying briefly while exiting tasks leave it (bounded)."""
    for _ in range(50):
        try:
            group.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.05)
    return False


class EmulatedCluster:
    """K network namespaces ("nodes") joined by a bridge, each link capped to ``rate`` both ways.

    Use as a context manager::

        with EmulatedCluster(nodes=2, rate="500mbit") as cluster:
            proc = cluster.run(0, ["python", "-c", "..."], env={...})

    Node ``i`` has address ``cluster.address(i)`` (10.213.X.(i+1)) on interface ``nc0`` and hostname
    ``cluster.hostname(i)`` (``node<i>``), which resolves to that address inside every node.
    ``rate`` is a tc rate string (``"500mbit"``, ``"2gbit"``) or None for an uncapped link.
    ``cpus_per_node`` (cores, e.g. 0.4) caps each node's CPU with a CFS quota, or None for no cap;
    ``set_cpus`` changes one node's cap between runs.
    """

    def __init__(
        self,
        nodes: int,
        rate: str | None = "500mbit",
        *,
        cpus_per_node: float | None = None,
        subnet: int | None = None,
        latency: str = "100ms",
    ) -> None:
        if nodes < 1 or nodes > 64:
            raise ValueError(f"nodes must be in 1..64 (got {nodes})")
        self.nodes = nodes
        self.rate = rate
        self.cpus_per_node = cpus_per_node
        self.latency = latency
        rand = random.randrange(256)
        self.tag = f"{os.getpid() & 0xFFFFFF:06x}{rand:02x}"
        self.subnet = subnet if subnet is not None else rand
        self.bridge = f"ncb{self.tag}"
        self.namespaces = [f"{PREFIX}-{self.tag}-{i}" for i in range(nodes)]
        self._host_links = [f"nch{self.tag}{i}" for i in range(nodes)]
        self._cgroups: list[Path] = []
        self._procs: list[subprocess.Popen] = []
        self._old_handlers: dict[int, object] = {}
        self._closed = True

    # -- addresses -------------------------------------------------------------------------
    def address(self, node: int) -> str:
        """IPv4 address of ``node`` on the cluster network."""
        return f"10.213.{self.subnet}.{node + 1}"

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> EmulatedCluster:
        reason = unavailable_reason(cpu_budgets=self.cpus_per_node is not None)
        if reason:
            raise ClusterUnavailable(reason)
        cleanup_leftovers()
        self._closed = False
        self._install_signal_handlers()
        atexit.register(self.close)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        for i, ns in enumerate(self.namespaces):
            host, peer = self._host_links[i], f"ncp{self.tag}{i}"
            _ip("netns", "add", ns)
            self._write_hosts(i)
            _ip("link", "add", host, "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", ns)
            _ip("-n", ns, "link", "set", peer, "name", INTERFACE)
            _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", INTERFACE)
            _ip("-n", ns, "link", "set", INTERFACE, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "set", host, "master", self.bridge)
            _ip("link", "set", host, "up")
            if self.rate is not None:
                # Upload: egress of the node's own end. Download: egress of the bridge end.
                self._shape(["ip", "netns", "exec", ns], INTERFACE)
                self._shape([], host)
            if self.cpus_per_node is not None:
                group = CPU_CGROUP_ROOT / f"{PREFIX}-{self.tag}-{i}"
                group.mkdir()
                self._cgroups.append(group)
                self.set_cpus(i, self.cpus_per_node)

    def hostname(self, node: int) -> str:
        """Hostname the processes of ``node`` see (``socket.gethostname()``), resolving to its address."""
        return f"node{node}"

    def _write_hosts(self, node: int) -> None:
        # torchrun's c10d rendezvous decides whether to host the store by resolving the
        # machine's hostname and comparing with the endpoint; gloo resolves it too. Each node
        # therefore gets its own hostname (a UTS namespace, see run()) and an /etc/hosts that
        # maps every node name to its cluster address.
        folder = NETNS_ETC / self.namespaces[node]
        folder.mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost"]
        lines += [f"{self.address(i)} {self.hostname(i)}" for i in range(self.nodes)]
        (folder / "hosts").write_text("\n".join(lines) + "\n")

    def _shape(self, prefix: list[str], dev: str) -> None:
        # tbf's bucket must hold at least one GSO super-packet (64 KiB on veth) and at least one
        # timer tick of tokens (rate / HZ, HZ >= 100) or it cannot reach its rate (tc-tbf(8)).
        rate_bps = parse_rate(self.rate)
        burst = max(256 * 1024, int(rate_bps / 8 / 100))
        subprocess.run(
            [*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
             "burst", str(burst), "latency", self.latency],
            check=True, capture_output=True, text=True,
        )

    def set_cpus(self, node: int, cpus: float | None) -> None:
        """Cap ``node``'s processes at ``cpus`` cores; None lifts the cap.

        A CFS quota over a 10 ms period (short, so a throttled rank waits milliseconds, not the
        100 ms default) bounds what the node may use; a high ``cpu.shares`` weight makes sure it
        gets that much while other work loads the machine (a cgroup competes with each task of the
        root group as one task of weight 1024: two ranks in a node would otherwise share one
        task's slice). Capped nodes never take more than their quota, so the weight is bounded.
        """
        if not self._cgroups:
            raise RuntimeError("construct the cluster with cpus_per_node to cap CPU")
        group = self._cgroups[node]
        period = 10_000  # us
        (group / "cpu.cfs_period_us").write_text(str(period))
        quota = -1 if cpus is None else max(1000, int(cpus * period))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
        (group / "cpu.shares").write_text(str(1024 if cpus is None else CAPPED_SHARES))

    def close(self) -> None:
        """Stop every process started here and remove every namespace, link and cgroup. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        for ns in self.namespaces:
            # Anything still running in our namespaces was started through run() by this cluster.
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "del", ns, check=False)
            _remove_etc(ns)
        for host in self._host_links:
            if _ip("link", "show", host, check=False).returncode == 0:
                _ip("link", "del", host, check=False)
        _ip("link", "del", self.bridge, check=False)
        for group in self._cgroups:
            _rmdir_cgroup(group)
        self._restore_signal_handlers()
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, frame: object) -> None:
            self.close()
            previous = self._old_handlers.get(signum)
            if callable(previous):
                previous(signum, frame)
            raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

        for signum in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[signum] = signal.getsignal(signum)
            signal.signal(signum, handler)

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._old_handlers.items():
            signal.signal(signum, previous)
        self._old_handlers.clear()

    # -- running -----------------------------------------------------------------------------
    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment for a process on a node: the caller's, one OpenMP thread, gloo on nc0."""
        env = dict(os.environ)
        env["OMP_NUM_THREADS"] = "1"
        env["GLOO_SOCKET_IFNAME"] = INTERFACE
        env.update(extra or {})
        return env

    def run(
        self,
        node: int,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        **popen_kwargs: object,
    ) -> subprocess.Popen:
        """Start ``argv`` inside ``node``: its network, hostname, process group and CPU cap.

        ``env`` entries are added to :meth:`env`'s defaults. The cluster kills the process group on
        close, so callers need not.
        """
        if self._closed:
            raise RuntimeError("cluster is not running (use it as a context manager)")
        group = self._cgroups[node] if self._cgroups else None
        hostname = self.hostname(node).encode()
        libc = ctypes.CDLL(None, use_errno=True)

        def enter_node() -> None:  # runs in the child between fork and exec
            os.setsid()
            if group is not None:
                (group / "cgroup.procs").write_text(str(os.getpid()))
            if libc.unshare(CLONE_NEWUTS) != 0 or libc.sethostname(hostname, len(hostname)) != 0:
                raise OSError(ctypes.get_errno(), "cannot give the node its own hostname")

        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.namespaces[node], *argv],
            env=self.env(env),
            preexec_fn=enter_node,
            **popen_kwargs,
        )
        self._procs.append(proc)
        return proc


_TCP_SINK = """
import socket, sys, time
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
srv.settimeout(30)
conn, _ = srv.accept()
received, start = 0, None
while chunk := conn.recv(1 << 20):
    start = start or time.perf_counter()
    received += len(chunk)
print(received * 8 / (time.perf_counter() - start))
"""

_TCP_SOURCE = """
import socket, sys, time
for _ in range(100):  # the sink may still be starting: retry for at most ~10 s
    try:
        conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
        break
    except OSError:
        time.sleep(0.1)
payload, end = bytes(1 << 20), time.perf_counter() + float(sys.argv[3])
while time.perf_counter() < end:
    conn.sendall(payload)
"""


def measure_tcp(cluster: EmulatedCluster, src: int, dst: int, seconds: float = 2.0, port: int = 5201) -> float:
    """Bits per second of one TCP stream from node ``src`` to node ``dst`` over ``seconds``."""
    import sys

    sink = cluster.run(dst, [sys.executable, "-c", _TCP_SINK, cluster.address(dst), str(port)],
                       stdout=subprocess.PIPE, text=True)
    source = cluster.run(src, [sys.executable, "-c", _TCP_SOURCE, cluster.address(dst), str(port), str(seconds)])
    source.wait(timeout=seconds + 30)
    out, _ = sink.communicate(timeout=30)
    if source.returncode or sink.returncode:
        raise RuntimeError(f"TCP measurement failed (source {source.returncode}, sink {sink.returncode})")
    return float(out)


def parse_rate(rate: str) -> float:
    """tc rate string to bits per second (``"500mbit"`` -> 5e8); tc(8) units, decimal prefixes."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?)(bit|bps)\s*", rate.lower())
    if not match:
        raise ValueError(f"not a tc rate like '500mbit' (got {rate!r})")
    value = float(match.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[match.group(2)]
    return value * 8 if match.group(3) == "bps" else value


def main(argv: Sequence[str] | None = None) -> int:
    """``python scripts/netcluster.py check|cleanup``: verify the cap here, or remove leftovers."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="build a 2-node cluster and measure TCP node 0 -> node 1")
    check.add_argument("--rate", default="500mbit", help="tc rate, or 'none' for an uncapped link")
    check.add_argument("--seconds", type=float, default=2.0)
    sub.add_parser("cleanup", help="remove namespaces/links/cgroups of crashed runs")
    args = parser.parse_args(argv)
    if args.command == "cleanup":
        for name in cleanup_leftovers():
            print(f"removed {name}")
        return 0
    reason = unavailable_reason()
    if reason:
        print(f"netcluster: {reason}")
        return 2
    rate = None if args.rate == "none" else args.rate
    with EmulatedCluster(nodes=2, rate=rate) as cluster:
        bps = measure_tcp(cluster, 0, 1, args.seconds)
    cap = f" (cap {parse_rate(rate) / 1e6:.0f} Mbit/s)" if rate else " (uncapped)"
    print(f"node 0 -> node 1: {bps / 1e6:.0f} Mbit/s{cap}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
