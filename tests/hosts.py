"""Test hosts on this machine: Linux network namespaces joined by veth pairs to a bridge, each
with an address of its own on one subnet, reaching the others by IP only (no route out).
Making them needs root (``ip netns``), as CI has."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

SUBNET = "10.213.0"


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")


class Hosts:
    """Hosts named ``names``, the first one also holding the bridge; ``address[name]`` is each
    one's IP address, ``command(name, [...])`` a command run on it.

    >>> with Hosts(["server", "laptop"]) as hosts:  # doctest: +SKIP
    ...     subprocess.run(hosts.command("laptop", ["ping", "-c1", hosts.address["server"]]))
    """

    def __init__(self, names: list[str]) -> None:
        if os.geteuid() != 0:
            raise PermissionError("test hosts are network namespaces, which only root can make "
                                  "(CI runs as root); run the tests as root")
        tag = uuid.uuid4().hex[:6]
        self.names = list(names)
        self.namespace = {name: f"strata-{tag}-{name}" for name in names}
        self.address = {name: f"{SUBNET}.{i + 1}" for i, name in enumerate(names)}
        self._made: list[str] = []

    def start(self) -> Hosts:
        try:
            for name in self.names:
                _ip("netns", "add", self.namespace[name])
                self._made.append(self.namespace[name])
                _ip("-n", self.namespace[name], "link", "set", "lo", "up")
            hub = self.namespace[self.names[0]]
            _ip("-n", hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", hub, "addr", "add", f"{self.address[self.names[0]]}/24", "dev", "br0")
            _ip("-n", hub, "link", "set", "br0", "up")
            for i, name in enumerate(self.names[1:], start=1):
                port = f"port{i}"
                _ip("link", "add", port, "netns", hub, "type", "veth",
                    "peer", "name", "eth0", "netns", self.namespace[name])
                _ip("-n", hub, "link", "set", port, "master", "br0", "up")
                _ip("-n", self.namespace[name], "addr", "add", f"{self.address[name]}/24", "dev", "eth0")
                _ip("-n", self.namespace[name], "link", "set", "eth0", "up")
        except BaseException:
            self.close()
            raise
        return self

    def command(self, name: str, args: list[str | Path]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace[name], *map(str, args)]

    def close(self) -> None:
        """Delete the namespaces (their veth pairs and bridge go with them)."""
        for namespace in reversed(self._made):
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True)
        self._made.clear()

    def __enter__(self) -> Hosts:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
