"""CoreDNS encrypted-DNS frontends: one CoreDNS process per resolver, in the resolver's
namespace, serving the five transports on the service address and forwarding everything to
the local Unbound (``forward . 127.0.0.1:5353``). No CoreDNS cache: the resolver's cache is
Unbound's, so every transport sees the same cache.

=========  ===================  ==============  ==================================
transport  CoreDNS listener     port            client endpoint
=========  ===================  ==============  ==================================
do53       ``dns://``           53 UDP + TCP    address
dot        ``tls://``           853 TCP         address, tls_name (ALPN ``dot``)
doh        ``https://``         443 TCP (h2)    ``https://<tls_name>/dns-query``
doh3       ``https3://``        443 UDP (h3)    ``https://<tls_name>/dns-query``
doq        ``quic://``          853 UDP         address, tls_name (ALPN ``doq``)
=========  ===================  ==============  ==================================

Which transport a query came in on: CoreDNS's ``{proto}`` only says udp/tcp, so every
server block logs with its own first word (``LOG_FORMAT``), e.g.::

    doq 10.10.1.2:51234 A IN www.single.test. udp 45 NOERROR 61 0.000812s

(fields: transport, client address:port, type, class, name, proto, request size, rcode,
response size, duration). Lines go to the frontend's log in the run dir
(``<testbed_dir>/logs/frontend-isp.log`` / ``frontend-public.log``).
"""

from __future__ import annotations

from pathlib import Path

from testbed import plan
from vantage_agent.dns import registry as dns_registry
from testbed.services.resolvers import LISTEN_ADDR, LISTEN_PORT, Resolver

SCHEMES = {"do53": "dns", "dot": "tls", "doh": "https", "doh3": "https3", "doq": "quic"}
LOG_FORMAT = "{transport} {{remote}}:{{port}} {{type}} {{class}} {{name}} {{proto}} {{size}} {{rcode}} {{rsize}} {{duration}}"


def corefile(r: Resolver, cert: Path, key: Path) -> str:
    blocks = []
    for transport, scheme in SCHEMES.items():
        port = plan.PORTS[transport]
        lines = [f"{scheme}://.:{port} {{", f"  bind {r.address}"]
        if dns_registry.transport(transport).encrypted:
            lines.append(f"  tls {cert} {key}")
        lines += [
            f"  forward . {LISTEN_ADDR}:{LISTEN_PORT} {{",
            "    prefer_udp",
            "    max_fails 0",
            "  }",
            f'  log . "{LOG_FORMAT.format(transport=transport)}"',
            "  errors",
            "}",
        ]
        blocks.append("\n".join(lines))
    return "\n".join(blocks) + "\n"


def write_config(r: Resolver, directory: Path, cert: Path, key: Path) -> Path:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"Corefile.frontend-{r.key}"
    p.write_text(corefile(r, cert, key))
    return p


def endpoints(r: Resolver) -> dict:
    """Every endpoint of ``r`` in the DNS engine's catalog format."""
    url = f"https://{r.tls_name}/dns-query"
    return {
        "name": r.name,
        "endpoints": {
            "do53": {"address": r.address, "port": plan.PORTS["do53"]},
            "dot": {"address": r.address, "port": plan.PORTS["dot"], "tls_name": r.tls_name},
            "doh": {"url": url, "address": r.address, "port": plan.PORTS["doh"], "tls_name": r.tls_name},
            "doh3": {"url": url, "address": r.address, "port": plan.PORTS["doh3"], "tls_name": r.tls_name},
            "doq": {"address": r.address, "port": plan.PORTS["doq"], "tls_name": r.tls_name},
        },
    }
