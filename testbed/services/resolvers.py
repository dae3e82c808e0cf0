"""The recursive resolvers: Unbound in ``dc-isp`` and ``dc-pubres``, recursing from the
testbed root (10.53.0.1), each listening only on 127.0.0.1:5353 inside its namespace, behind
a CoreDNS frontend (``frontends``) that serves the five transports on the service address.

Choices that keep round-trip counts predictable (documented in docs/testbed-services.md):

- ``module-config: "iterator"``: no DNSSEC validation (the testbed zones are unsigned) and no
  trust anchor; ``qname-minimisation: no`` (one query per zone cut, not one per label);
  ``prefetch: no``, ``serve-expired: no``; ``do-ip6: no`` (the island is IPv4).
- ``local-zone: "test." nodefault``: Unbound blocks the special-use ``test.`` by default
  (RFC 6761); the testbed lives in it.
- ``outgoing-interface``: the resolver's own service address, so the whoami zone answers
  10.53.1.1 for the ISP resolver and 10.53.2.1 for the public one.
- Remote control on a Unix socket in the run dir (sockets on the file system are not
  namespaced): ``flush`` uses ``unbound-control`` without entering the namespace.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from testbed import plan
from testbed.services.dns_hierarchy import ROOT_NS

LISTEN_ADDR = "127.0.0.1"
LISTEN_PORT = 5353


@dataclass(frozen=True)
class Resolver:
    key: str  # "isp" | "public"
    name: str  # catalog name, e.g. testbed-isp
    ns: str
    address: str  # service address of the frontend (and Unbound's egress address)
    tls_name: str


RESOLVERS = [
    Resolver("isp", "testbed-isp", plan.ISP_NS, plan.ISP_RESOLVER, plan.ISP_RESOLVER_NAME),
    Resolver("public", "testbed-public", plan.PUBRES_NS, plan.PUBLIC_RESOLVER, plan.PUBLIC_RESOLVER_NAME),
]


def root_hints() -> str:
    return f". 3600000 IN NS {ROOT_NS}.\n{ROOT_NS}. 3600000 IN A {plan.ROOT_SERVER}\n"


def unbound_conf(r: Resolver, directory: Path) -> str:
    d = Path(directory)
    return f"""# dnscamp testbed: {r.name} (generated; see testbed/services/resolvers.py)
server:
  verbosity: 1
  use-syslog: no
  logfile: ""
  log-time-ascii: yes
  chroot: ""
  username: ""
  directory: "{d}"
  pidfile: ""
  do-daemonize: no
  num-threads: 1
  so-reuseport: no
  interface: {LISTEN_ADDR}@{LISTEN_PORT}
  port: {LISTEN_PORT}
  access-control: 127.0.0.0/8 allow
  do-ip4: yes
  do-ip6: no
  do-udp: yes
  do-tcp: yes
  outgoing-interface: {r.address}
  root-hints: "{d / 'root.hints'}"
  module-config: "iterator"
  trust-anchor-signaling: no
  root-key-sentinel: no
  qname-minimisation: no
  prefetch: no
  prefetch-key: no
  serve-expired: no
  harden-referral-path: no
  harden-glue: yes
  aggressive-nsec: no
  do-not-query-localhost: no
  unwanted-reply-threshold: 0
  minimal-responses: yes
  local-zone: "test." nodefault
  cache-min-ttl: 0
  infra-host-ttl: 900
  statistics-interval: 0
remote-control:
  control-enable: yes
  control-interface: "{control_socket(r, d)}"
  control-use-cert: no
"""


def control_socket(r: Resolver, directory: Path) -> Path:
    return Path(directory) / f"unbound-{r.key}.ctl"


def write_config(r: Resolver, directory: Path) -> Path:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "root.hints").write_text(root_hints())
    conf = d / f"unbound-{r.key}.conf"
    conf.write_text(unbound_conf(r, d))
    return conf


def argv(conf: Path) -> list[str]:
    exe = shutil.which("unbound") or "/usr/sbin/unbound"
    return [exe, "-d", "-p", "-c", str(conf)]


def control(conf: Path, *args: str, timeout: float = 10) -> subprocess.CompletedProcess:
    exe = shutil.which("unbound-control") or "/usr/sbin/unbound-control"
    return subprocess.run([exe, "-c", str(conf), *args], capture_output=True, text=True, timeout=timeout)


def flush(conf: Path) -> None:
    """Empty the resolver's caches (records, negative answers, delegations, server RTT info)."""
    for cmd in (["flush_zone", "."], ["flush_infra", "all"], ["flush_bogus"], ["flush_negative"],
                ["flush_requestlist"]):
        r = control(conf, *cmd)
        if r.returncode != 0:
            raise RuntimeError(f"unbound-control -c {conf} {' '.join(cmd)}: {(r.stderr or r.stdout).strip()}")
