"""Network namespaces as simulated nodes: N node namespaces wired to a bridge in a switch namespace, a
`tc tbf` rate cap on each node's eth0, and the kernel's byte counters. The experiment that runs torchrun
in them is workshop.launch.netsim; this module only builds, caps, counts and always tears down.

    [ns wsn-n0: eth0 10.77.0.1] --veth-- [ns wsn-sw: bridge] --veth-- [ns wsn-n1: eth0 10.77.0.2]
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys

from workshop.lang import _
from workshop.plan.topology import parse_rate


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _tc(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["ip", "netns", "exec", ns, "tc", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def netns_available() -> tuple[bool, str]:
    """Can we create namespaces here? (root + iproute2 + a kernel that allows it), with the reason if not."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return False, _("iproute2 (ip, tc) is not installed")
    if os.geteuid() != 0:
        return False, _("network namespaces need root (running as uid {uid})").format(uid=os.geteuid())
    probe = f"wsnprobe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except subprocess.CalledProcessError as exc:
        return False, _("`ip netns add` failed: {error}").format(error=exc.stderr.strip())
    _ip("netns", "del", probe, check=False)
    return True, _("root and iproute2 available")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale(prefix: str = "wsn") -> list[str]:
    """Delete namespaces left by earlier runs that were killed (their veths go with them).

    Names carry the creating process id (`wsn12345-n0`), so a run never deletes the namespaces of another
    run that is still going (a notebook and a test at the same time), only those whose process is gone."""
    if shutil.which("ip") is None:
        return []
    out = _ip("netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    stale = []
    for name in names:
        m = re.fullmatch(rf"{re.escape(prefix)}(\d+)-(sw|n\d+)", name)
        if m and (int(m.group(1)) == os.getpid() or not _alive(int(m.group(1)))):
            stale.append(name)
    for name in stale:
        _ip("netns", "del", name, check=False)
    return stale


class Topology:
    """N node namespaces wired to a bridge in a switch namespace; a context manager that always tears down."""

    def __init__(self, nodes: int, subnet: str = "10.77.0.0/24", prefix: str = "wsn"):
        self.prefix = prefix
        net = ipaddress.ip_network(subnet)
        self.prefixlen = net.prefixlen
        hosts = net.hosts()
        self.addresses = [str(next(hosts)) for _ in range(nodes)]
        tag = f"{prefix}{os.getpid()}"
        self.switch = f"{tag}-sw"
        self.namespaces = [f"{tag}-n{i}" for i in range(nodes)]
        self.created: list[str] = []

    def __enter__(self):
        cleanup_stale(self.prefix)
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def _add_ns(self, name: str) -> None:
        _ip("netns", "add", name)
        self.created.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _build(self) -> None:
        self._add_ns(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, (ns, addr) in enumerate(zip(self.namespaces, self.addresses)):
            self._add_ns(ns)
            port = f"p{i}"
            # veth pair created directly across the two namespaces: nothing appears in the host's namespace
            _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{addr}/{self.prefixlen}", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def teardown(self) -> None:
        for name in reversed(self.created):
            _ip("netns", "del", name, check=False)
        self.created.clear()

    def set_rate(self, rate: str) -> None:
        """Cap every node's egress with a token bucket (tbf), or remove the cap for 'none'."""
        bps = parse_rate(rate)
        for ns in self.namespaces:
            if bps is None:
                _tc(ns, "qdisc", "del", "dev", "eth0", "root", check=False)
                continue
            # burst: ~5 ms of traffic at the cap (>= 64 KiB so a GSO segment fits), queue up to 100 ms
            burst = max(64 * 1024, bps // 8 // 200)
            limits = ("rate", str(rate), "burst", str(burst), "latency", "100ms")
            _tc(ns, "qdisc", "replace", "dev", "eth0", "root", "tbf", *limits)

    def counters(self) -> list[dict]:
        """Bytes sent/received on each node's eth0 (from the kernel's interface statistics)."""
        out = []
        for ns in self.namespaces:
            info = json.loads(_ip("-j", "-s", "-n", ns, "link", "show", "dev", "eth0").stdout)[0]["stats64"]
            out.append({"tx_bytes": info["tx"]["bytes"], "rx_bytes": info["rx"]["bytes"]})
        return out

    def reachable(self) -> bool:
        """Node 0 reaches every other node over the bridge: a TCP connect that is refused (nobody listens yet)
        proves the path works; a timeout means the wiring is broken. (No `ping` needed.)"""
        probe = (
            "import socket,sys\n"
            "for a in sys.argv[1:]:\n"
            "    s=socket.socket(); s.settimeout(3)\n"
            "    try: s.connect((a, 9))\n"
            "    except ConnectionRefusedError: pass\n"
            "    except OSError: sys.exit(1)\n"
        )
        r = subprocess.run(
            ["ip", "netns", "exec", self.namespaces[0], sys.executable, "-c", probe, *self.addresses[1:]],
            capture_output=True,
            check=False,
        )
        return r.returncode == 0
