"""A CoreDNS (the testbed's frontend implementation) on 127.0.0.1 serving all five transports
from a ``template`` zone, with a throw-away test CA: the fastest real server for loopback
benchmarks and tests. Binary: ``vantage_agent.paths.bin_dir()/coredns-1.15.0`` (built by
install/40-testbed-servers.sh)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vantage_agent.dns import registry  # noqa: E402
from vantage_agent.paths import bin_dir  # noqa: E402

COREDNS = bin_dir() / "coredns-1.15.0"
TLS_NAME = "dns.test"

TEMPLATE = """  template IN A {
    answer "{{ .Name }} 60 IN A 192.0.2.1"
  }
  template IN AAAA {
    answer "{{ .Name }} 60 IN AAAA 2001:db8::1"
  }"""


def _free_port(kind: int) -> int:
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class LocalCoreDNS:
    def __init__(self, workdir: Path):
        sys.path.insert(0, str(ROOT / "tests" / "local"))
        from tests.local.dnsfake import make_certs

        if not COREDNS.exists():
            raise FileNotFoundError(f"{COREDNS} (run install/40-testbed-servers.sh)")
        self.dir = Path(workdir)
        self.ca, cert, key = make_certs(self.dir, TLS_NAME)
        self.ports = {"do53": _free_port(socket.SOCK_DGRAM), "dot": _free_port(socket.SOCK_STREAM),
                      "doh": _free_port(socket.SOCK_STREAM), "doh3": _free_port(socket.SOCK_DGRAM),
                      "doq": _free_port(socket.SOCK_DGRAM)}
        schemes = {"do53": "dns", "dot": "tls", "doh": "https", "doh3": "https3", "doq": "quic"}
        blocks = []
        for t, port in self.ports.items():
            tls = f"  tls {cert} {key}\n" if registry.transport(t).encrypted else ""
            blocks.append(f"{schemes[t]}://.:{port} {{\n  bind 127.0.0.1\n{tls}{TEMPLATE}\n}}\n")
        conf = self.dir / "Corefile"
        conf.write_text("\n".join(blocks))
        self.log = open(self.dir / "coredns.log", "wb")
        self.proc = subprocess.Popen([str(COREDNS), "-conf", str(conf)], stdout=self.log, stderr=subprocess.STDOUT)
        self._wait()

    def _wait(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"coredns exited: {(self.dir / 'coredns.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.ports["doh"]), timeout=0.2):
                    pass
                with socket.create_connection(("127.0.0.1", self.ports["dot"]), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("coredns did not start listening")

    def endpoint(self, transport: str):
        from vantage_agent.dns._common import Endpoint

        key = registry.endpoint_key(transport)
        port = self.ports[key]
        url = f"https://{TLS_NAME}:{port}/dns-query" if registry.transport(key).uses_url else None
        return Endpoint(key, "127.0.0.1", port, tls_name=TLS_NAME, url=url, ca_file=self.ca, resolver="local-coredns")

    def info(self) -> dict:
        eps = {}
        for t in self.ports:
            ep = self.endpoint(t)
            eps[t] = {"address": ep.address, "port": ep.port, "tls_name": ep.tls_name, "url": ep.url}
        return {"up": False, "resolvers": [{"name": "local-coredns", "endpoints": eps}], "ca_file": self.ca}

    def close(self) -> None:
        self.proc.terminate()  # our own child, by PID
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
