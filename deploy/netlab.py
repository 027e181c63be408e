"""A throw-away network of Linux network namespaces on one bridge, optionally rate-shaped.

Why: to run every party of a consortium as if on its own host, with a real link (its own
address, its own TCP stack, a token-bucket rate limit like a Fast Ethernet port) between
it and the others, on one machine. Each host is a namespace with one veth pair to a
bridge in the root namespace; the bridge has no address, so traffic stays between the
namespaces of this lab. Names carry a random tag so parallel labs never collide, and
`close()` removes every namespace, veth, bridge and process the lab made — `NetLab` is a
context manager and turns SIGTERM/SIGHUP into an exception so cleanup also runs then.

Needs root and iproute2 (`ip`, `tc`); `unavailable_reason()` says why a lab cannot run.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from types import FrameType

# A private (RFC 1918) range, configured only inside the lab's namespaces, which have no default
# route: their traffic can reach nothing but each other.
DEFAULT_SUBNET = "10.213.0.0/24"
_ETC_NETNS = "/etc/netns"


class NetLabError(RuntimeError):
    """An `ip`/`tc` command failed; the message names the command and its stderr."""


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetLabError(f"{' '.join(argv)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc


def unavailable_reason() -> str | None:
    """None when namespaces, veth pairs and a bridge can be made here; otherwise why not."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (run as root or with CAP_NET_ADMIN + CAP_SYS_ADMIN)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"'{tool}' (iproute2) is not installed"
    probe = f"fdprobe{secrets.token_hex(3)}"
    made = _run(["ip", "netns", "add", probe], check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _run(["ip", "netns", "del", probe], check=False)
    return None


def parse_rate(rate: str) -> int:
    """'100mbit' / '10Mbit' / '512kbit' / '1gbit' -> bits per second (what tc's tbf accepts)."""
    text = rate.strip().lower()
    for suffix, factor in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3), ("bit", 1)):
        if text.endswith(suffix):
            number = text[: -len(suffix)]
            try:
                value = float(number)
            except ValueError:
                break
            if value <= 0:
                break
            return int(value * factor)
    raise ValueError(f"invalid rate {rate!r}: use e.g. 100mbit, 10mbit, 512kbit")


@dataclass
class Host:
    """One namespace: its name, its address on the lab bridge, the host-side end of its veth."""

    name: str
    netns: str
    address: str
    host_veth: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


class NetLab:
    """Namespaces on a bridge; `add_host`, `popen` inside a host, `shape`, `cut`, `close`."""

    def __init__(self, subnet: str = DEFAULT_SUBNET, tag: str | None = None) -> None:
        self.tag = tag or secrets.token_hex(3)
        self.net = ipaddress.ip_network(subnet)
        self._next = iter(self.net.hosts())
        self.bridge = f"fdb{self.tag}"
        self.hosts: dict[str, Host] = {}
        self._bridge_made = False
        self._closed = False
        self._old_handlers: dict[int, object] = {}

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "NetLab":
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            self._bridge_made = True
            _run(["ip", "link", "set", self.bridge, "up"])
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through __exit__, which cleans up

    def add_host(self, name: str) -> Host:
        """A namespace with loopback up and one veth to the bridge; address from the lab subnet."""
        index = len(self.hosts)
        host = Host(name=name, netns=f"fedanon-{self.tag}-{name}", address=str(next(self._next)),
                    host_veth=f"fd{self.tag}h{index}")
        self.hosts[name] = host  # registered first: close() removes whatever part exists
        inner = f"fd{self.tag}n{index}"
        _run(["ip", "netns", "add", host.netns])
        _run(["ip", "link", "add", host.host_veth, "type", "veth", "peer", "name", inner])
        _run(["ip", "link", "set", inner, "netns", host.netns])
        _run(["ip", "-n", host.netns, "link", "set", inner, "name", "eth0"])
        _run(["ip", "-n", host.netns, "addr", "add", f"{host.address}/{self.net.prefixlen}", "dev", "eth0"])
        _run(["ip", "-n", host.netns, "link", "set", "lo", "up"])
        _run(["ip", "-n", host.netns, "link", "set", "eth0", "up"])
        _run(["ip", "link", "set", host.host_veth, "master", self.bridge])
        _run(["ip", "link", "set", host.host_veth, "up"])
        return host

    def name_hosts(self) -> None:
        """Let every host resolve the others by lab name (`ip netns exec` mounts /etc/netns/NS/hosts)."""
        lines = ["127.0.0.1 localhost"] + [f"{h.address} {h.name}" for h in self.hosts.values()]
        for host in self.hosts.values():
            folder = os.path.join(_ETC_NETNS, host.netns)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "hosts"), "w", encoding="ascii") as fh:
                fh.write("\n".join(lines) + "\n")

    def shape(self, rate_bps: int) -> None:
        """Token-bucket limit every host's link in both directions (like a switch port of that speed)."""
        burst = max(rate_bps // 8 // 100, 16 * 1514)  # ≈ 10 ms of traffic, at least 16 full frames
        spec = ["tbf", "rate", f"{rate_bps}bit", "burst", str(burst), "latency", "100ms"]
        for host in self.hosts.values():
            _run(["tc", "qdisc", "replace", "dev", host.host_veth, "root", *spec])  # towards the host
            _run(["ip", "netns", "exec", host.netns, "tc", "qdisc", "replace", "dev", "eth0", "root", *spec])

    def cut(self, name: str) -> None:
        """Pull the host's cable: its bridge port goes down (no reset is sent; packets just vanish)."""
        _run(["ip", "link", "set", self.hosts[name].host_veth, "down"])

    def popen(self, name: str, argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """Start `argv` inside the host's namespace; the lab stops it on close."""
        host = self.hosts[name]
        proc = subprocess.Popen(["ip", "netns", "exec", host.netns, *argv], start_new_session=True,
                                **kwargs)  # type: ignore[call-overload]
        host.procs.append(proc)
        return proc

    def run(self, name: str, argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside the host's namespace to completion (output captured)."""
        host = self.hosts[name]
        return subprocess.run(["ip", "netns", "exec", host.netns, *argv], capture_output=True, text=True,
                              timeout=timeout)

    def close(self) -> None:
        """Stop every process, delete every namespace and veth and the bridge (idempotent)."""
        if self._closed:
            return
        self._closed = True
        procs = [p for h in self.hosts.values() for p in h.procs]
        for proc in procs:
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(8)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(5)
        for host in self.hosts.values():
            _kill_leftovers(host.netns)
            _run(["ip", "link", "del", host.host_veth], check=False)  # removes the peer too
            _run(["ip", "netns", "del", host.netns], check=False)
            shutil.rmtree(os.path.join(_ETC_NETNS, host.netns), ignore_errors=True)
        if self._bridge_made:
            _run(["ip", "link", "del", self.bridge], check=False)
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_leftovers(netns: str) -> None:
    """Any process still inside the namespace (e.g. one that escaped its group) is killed by pid."""
    listed = _run(["ip", "netns", "pids", netns], check=False)
    for word in listed.stdout.split():
        try:
            os.kill(int(word), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
