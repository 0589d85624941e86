"""The emulated cluster testbed (scripts/netcluster.py): links really capped, always cleaned up.

The network tests need root and `ip netns`; they skip with the reason otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import netcluster
from netcluster import EmulatedCluster, parse_rate

REASON = netcluster.unavailable_reason()
CPU_REASON = netcluster.unavailable_reason(cpu_budgets=True)


def needs_netns(test):
    """Mark a test as needing root and network namespaces; skip it with the reason otherwise."""
    return pytest.mark.netns(pytest.mark.skipif(REASON is not None, reason=str(REASON))(test))


def leftovers(tag: str) -> list[str]:
    """Namespaces, links and cgroups whose name carries ``tag``."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    names += subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.split()
    cgroups = netcluster.CPU_CGROUP_ROOT
    names += [p.name for p in cgroups.glob("*")] if cgroups.is_dir() else []
    return [name for name in names if tag in name]


def test_parse_rate_follows_tc_units():
    assert parse_rate("500mbit") == 5e8
    assert parse_rate("2gbit") == 2e9
    assert parse_rate("1mbps") == 8e6  # tc: bps = bytes per second
    with pytest.raises(ValueError):
        parse_rate("fast")


def test_interface_names_fit_the_kernel_limit():
    cluster = EmulatedCluster(nodes=64)
    cluster.tag = "ffffffff"  # the longest tag: a 6-hex-digit pid and a random byte
    names = [f"ncb{cluster.tag}", f"nch{cluster.tag}63", f"ncp{cluster.tag}63", netcluster.INTERFACE]
    assert all(len(name) <= 15 for name in names)  # IFNAMSIZ - 1


@needs_netns
def test_link_is_capped_in_both_directions_and_removed_after():
    with EmulatedCluster(nodes=2, rate="300mbit") as cluster:
        tag = cluster.tag
        assert leftovers(tag)
        up = netcluster.measure_tcp(cluster, 0, 1, seconds=1.5)
        down = netcluster.measure_tcp(cluster, 1, 0, seconds=1.5, port=5202)
    for bps in (up, down):
        # tbf counts whole frames, TCP reports payload: a few percent below the rate, never above.
        assert 0.85 * 3e8 < bps < 1.02 * 3e8
    assert leftovers(tag) == []


@needs_netns
def test_each_node_has_its_own_hostname_resolving_to_its_address():
    probe = "import socket; name = socket.gethostname(); print(name, socket.gethostbyname(name))"
    with EmulatedCluster(nodes=2, rate=None) as cluster:
        outs = [cluster.run(node, [sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True)
                .communicate(timeout=30)[0].split() for node in range(2)]
        assert outs == [[cluster.hostname(n), cluster.address(n)] for n in range(2)]
    assert os.uname().nodename not in {out[0] for out in outs}  # the machine's own name is untouched


@needs_netns
def test_cleanup_runs_when_the_body_raises():
    with pytest.raises(ZeroDivisionError), EmulatedCluster(nodes=2, rate=None) as cluster:
        tag = cluster.tag
        cluster.run(1, ["sleep", "60"])
        raise ZeroDivisionError
    assert leftovers(tag) == []


@needs_netns
def test_sigterm_cleans_up_and_kills_node_processes():
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; sys.path.insert(0, sys.argv[1]); import netcluster\n"
         "with netcluster.EmulatedCluster(nodes=2, rate='100mbit', cpus_per_node=float(sys.argv[2]) or None) as c:\n"
         "    p = c.run(0, ['sleep', '60'])\n"
         "    print(c.tag, p.pid, flush=True)\n"
         "    time.sleep(60)\n",
         str(ROOT / "scripts"), "0" if CPU_REASON else "0.5"],
        stdout=subprocess.PIPE, text=True,
    )
    tag, sleeper = child.stdout.readline().split()
    assert leftovers(tag)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) != 0
    assert leftovers(tag) == []
    with pytest.raises(ProcessLookupError):
        os.kill(int(sleeper), 0)


BUSY = """
import time
wall, cpu = time.perf_counter(), time.process_time()
while time.process_time() - cpu < 0.5:
    pass
print((time.process_time() - cpu) / (time.perf_counter() - wall))
"""


@needs_netns
@pytest.mark.skipif(CPU_REASON is not None, reason=str(CPU_REASON))
def test_cpu_budget_caps_a_busy_process():
    with EmulatedCluster(nodes=1, rate=None, cpus_per_node=0.25) as cluster:
        share = float(cluster.run(0, [sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
                      .communicate(timeout=60)[0])
    # CPU seconds per wall second: at most the quota (0.25), and well above nothing (the weight
    # gives the node its quota even on a busy machine)
    assert 0.1 < share < 0.3


@needs_netns
def test_leftovers_of_a_dead_run_are_removed_and_live_runs_kept():
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{dead.pid:06x}00"
    live = f"{os.getpid():06x}ff"
    subprocess.run(["ip", "netns", "add", f"advnc-{stale}-0"], check=True)
    subprocess.run(["ip", "link", "add", f"ncb{stale}", "type", "bridge"], check=True)
    subprocess.run(["ip", "netns", "add", f"advnc-{live}-0"], check=True)
    try:
        removed = netcluster.cleanup_leftovers()
        assert f"advnc-{stale}-0" in removed and f"ncb{stale}" in removed
        assert leftovers(stale) == []
        assert leftovers(live) == [f"advnc-{live}-0"]
    finally:
        subprocess.run(["ip", "netns", "del", f"advnc-{live}-0"])
        subprocess.run(["ip", "netns", "del", f"advnc-{stale}-0"], capture_output=True)
        subprocess.run(["ip", "link", "del", f"ncb{stale}"], capture_output=True)


GLOO_ALL_REDUCE = """
import datetime, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
world, size = dist.get_world_size(), int(sys.argv[1])
tensor = torch.ones(size // 4)
for _ in range(2):
    dist.all_reduce(tensor)
times = []
for _ in range(5):
    dist.barrier()
    start = time.perf_counter()
    dist.all_reduce(tensor)
    times.append(time.perf_counter() - start)
if dist.get_rank() == 0:
    # nccl-tests busbw for all_reduce, in bits/s to compare with the tc rate
    print(size / sorted(times)[2] * 2 * (world - 1) / world * 8)
dist.destroy_process_group()
"""


def gloo_busbw(rate: str | None, size: int) -> float:
    with EmulatedCluster(nodes=2, rate=rate) as cluster:
        master = {"MASTER_ADDR": cluster.address(0), "MASTER_PORT": "29531", "WORLD_SIZE": "2"}
        procs = [
            cluster.run(node, [sys.executable, "-c", GLOO_ALL_REDUCE, str(size)],
                        env={**master, "RANK": str(node)}, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL, text=True)
            for node in range(2)
        ]
        outs = [proc.communicate(timeout=120)[0] for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0]
    return float(outs[0])


@needs_netns
@pytest.mark.slow
def test_gloo_all_reduce_between_nodes_runs_at_the_tbf_rate():
    pytest.importorskip("torch")
    capped = gloo_busbw("200mbit", 8_000_000)
    uncapped = gloo_busbw(None, 8_000_000)
    assert 0.85 * 2e8 < capped < 1.05 * 2e8
    assert uncapped > 3 * capped  # the cap, not the CPU, limited the capped run
