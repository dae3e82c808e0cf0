"""The testbed's DNS hierarchy: zone files and the CoreDNS config of the authoritative servers.

All of them live in ``dc-dns`` (at the core, behind the backbone from the ISP resolver):

==============  ============  =====================================================================
server          address       serves
==============  ============  =====================================================================
root            10.53.0.1     ``.``: delegates ``test.`` to 10.53.0.2; every other name NXDOMAIN
                              at once (browser background lookups such as google.com never stall)
TLD             10.53.0.2     ``test.``: delegates every site zone to 10.53.0.3 and ``whoami.test.``
                              to 10.53.0.4; holds the resolvers' names (isp-resolver.test, ...)
sites           10.53.0.3     every site zone of ``sites.generate()`` (one A record per hostname)
whoami          10.53.0.4     ``whoami.test.``: any name below it is answered with an A record of
                              the *asking resolver's* address (TTL 0, so every query reaches the
                              server) and logged: random-subdomain discovery (QuicSocks method,
                              001_3c494309ab66be23.txt)
hol             10.53.0.2     ``hol.test.``: a wildcard in the ``test.`` zone (any name: A 192.0.2.1 at once)
slow.hol        10.53.0.1     ``slow.hol.test.``, delegated by ``test.``: any name answered A 192.0.2.53
                              after 1,000 ms (CoreDNS ``erratic`` ``delay``): the head-of-line
                              experiment's fast and delayed names
==============  ============  =====================================================================

The head-of-line zones need no new address: the fast names are a wildcard of the TLD's zone,
and ``slow.hol.test.`` is a zone cut whose server block listens on the root's address (CoreDNS
hands a query to the longest matching zone of the listener, so the root's ``.`` is untouched).
The cut matters to the resolver: Unbound keeps a server's RTT and timeout per (address, zone),
so the slow zone's 1 s answers raise only its own retransmission timeout, and the TLD's stays
that of a fast server. Every name below both zones is answered, so the experiment asks names
with a random label that no cache holds; the delay is real, at the authoritative side, behind
the resolver's recursion.

CoreDNS's ``whoami`` plugin puts the client address in the *additional* section, which a
recursive resolver does not pass on, so the whoami zone uses the ``template`` plugin with
``{{ .Remote }}`` in the answer section instead. Root, TLD and sites run in one CoreDNS process
(``dns-auth``); the whoami server is its own process (``dns-whoami``), so its log file
(``<testbed_dir>/logs/dns-whoami.log``) holds nothing but whoami queries, one line each::

    whoami 10.53.1.1:41377 A IN 7f3a9c.whoami.test. udp NOERROR 0.000123s

Zone TTLs are 3600 s (a warm resolver cache stays warm during a run); negative answers are
cached for 300 s (SOA minimum).
"""

from __future__ import annotations

from pathlib import Path

from testbed import plan
from testbed.services.sites import SiteSet

TTL = 3600
NEG_TTL = 300
ROOT_NS = "a.root-servers.test"
TLD_NS = "ns1.test"
WHOAMI_NS = f"ns.{plan.WHOAMI_ZONE}"
RESOLVER_NAMES = {plan.ISP_RESOLVER_NAME: plan.ISP_RESOLVER, plan.PUBLIC_RESOLVER_NAME: plan.PUBLIC_RESOLVER}
SERIAL = 2026010101
HOL_ZONE = "hol.test"  # fast names: answered at once
HOL_SLOW_ZONE = f"slow.{HOL_ZONE}"  # delayed names: answered after HOL_DELAY_MS
HOL_DELAY_MS = 1000  # 003_b61199a6a5b37f70.txt §3: "delay one in every 25 queries by 1000ms"

# Log line formats (CoreDNS `log` plugin placeholders); the first word names the server.
AUTH_LOG = "auth {local} {remote}:{port} {type} {class} {name} {proto} {rcode} {rsize} {duration}"
WHOAMI_LOG = "whoami {remote}:{port} {type} {class} {name} {proto} {rcode} {duration}"


def _soa(origin: str) -> str:
    o = origin.rstrip(".")
    if o == "":
        owner, mname, rname = ".", ROOT_NS, "hostmaster.test."
    elif o == "test":
        owner, mname, rname = "test.", TLD_NS, "hostmaster.test."
    else:
        owner, mname, rname = f"{o}.", f"ns.{o}", f"hostmaster.{o}."
    return f"{owner} {TTL} IN SOA {mname}. {rname} {SERIAL} 3600 600 86400 {NEG_TTL}"


def root_zone() -> str:
    return "\n".join([
        "$ORIGIN .",
        _soa("."),
        f". {TTL} IN NS {ROOT_NS}.",
        f"test. {TTL} IN NS {TLD_NS}.",
        # glue for the names under the delegated test. zone
        f"{ROOT_NS}. {TTL} IN A {plan.ROOT_SERVER}",
        f"{TLD_NS}. {TTL} IN A {plan.TLD_SERVER}",
        "",
    ])


def tld_zone(sites: SiteSet) -> str:
    lines = [
        "$ORIGIN test.",
        _soa("test."),
        f"test. {TTL} IN NS {TLD_NS}.",
        f"{TLD_NS}. {TTL} IN A {plan.TLD_SERVER}",
        f"{ROOT_NS}. {TTL} IN A {plan.ROOT_SERVER}",
    ]
    for name, addr in RESOLVER_NAMES.items():
        lines.append(f"{name}. {TTL} IN A {addr}")
    lines.append(f"*.{HOL_ZONE}. 60 IN A 192.0.2.1")  # the fast head-of-line names (module docstring)
    lines.append(f"{HOL_SLOW_ZONE}. {TTL} IN NS ns.{HOL_SLOW_ZONE}.")
    lines.append(f"ns.{HOL_SLOW_ZONE}. {TTL} IN A {plan.ROOT_SERVER}")
    lines.append(f"{plan.WHOAMI_ZONE}. {TTL} IN NS {WHOAMI_NS}.")
    lines.append(f"{WHOAMI_NS}. {TTL} IN A {plan.WHOAMI_AUTH_SERVER}")
    for zone in sites.zones():
        lines.append(f"{zone}. {TTL} IN NS ns.{zone}.")
        lines.append(f"ns.{zone}. {TTL} IN A {plan.SITES_AUTH_SERVER}")
    lines.append("")
    return "\n".join(lines)


def site_zone(zone: str, records: dict[str, str]) -> str:
    lines = [f"$ORIGIN {zone}.", _soa(zone), f"{zone}. {TTL} IN NS ns.{zone}.",
             f"ns.{zone}. {TTL} IN A {plan.SITES_AUTH_SERVER}"]
    for label, addr in sorted(records.items()):
        if label == "ns":
            raise ValueError(f"site zone {zone}: the label 'ns' is reserved for the name server")
        lines.append(f"{label}.{zone}. {TTL} IN A {addr}")
    lines.append("")
    return "\n".join(lines)


def write_zones(sites: SiteSet, directory: Path) -> dict[str, Path]:
    """Write every zone file into ``directory``; returns {zone: path} (root zone as ".")."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out = {".": directory / "root.zone", "test": directory / "test.zone"}
    out["."].write_text(root_zone())
    out["test"].write_text(tld_zone(sites))
    for zone, records in sites.zones().items():
        p = directory / f"{zone}.zone"
        p.write_text(site_zone(zone, records))
        out[zone] = p
    return out


def auth_corefile(sites: SiteSet, zone_files: dict[str, Path]) -> str:
    """Corefile of the ``dns-auth`` process: root, TLD and site servers, each bound to its
    address. ``{local}`` in the log line is the listening address, which tells which one."""
    blocks = [
        f". {{\n  bind {plan.ROOT_SERVER}\n  file {zone_files['.']} .\n  log . \"{AUTH_LOG}\"\n  errors\n}}",
        f"test. {{\n  bind {plan.TLD_SERVER}\n  file {zone_files['test']} test.\n  log . \"{AUTH_LOG}\"\n  errors\n}}",
    ]
    # One server block per site zone, all on the sites address (CoreDNS groups them).
    for zone in sites.zones():
        blocks.append(f"{zone}. {{\n  bind {plan.SITES_AUTH_SERVER}\n  file {zone_files[zone]} {zone}.\n"
                      f"  log . \"{AUTH_LOG}\"\n  errors\n}}")
    return "\n".join(blocks + [slow_block()]) + "\n"


def slow_block() -> str:
    """The delayed head-of-line zone (module docstring), on the root's address: every name
    answered after ``HOL_DELAY_MS`` (erratic's ``delay 1`` = every query)."""
    return (f"{HOL_SLOW_ZONE}. {{\n  bind {plan.ROOT_SERVER}\n  erratic {{\n    delay 1 {HOL_DELAY_MS}ms\n  }}\n"
            f"  log . \"{AUTH_LOG}\"\n  errors\n}}")


def whoami_corefile() -> str:
    z = plan.WHOAMI_ZONE
    soa = f"{z}. 0 IN SOA {WHOAMI_NS}. hostmaster.{z}. {SERIAL} 3600 600 86400 0"
    return f"""{z}. {{
  bind {plan.WHOAMI_AUTH_SERVER}
  log . "{WHOAMI_LOG}"
  errors
  template IN A {z} {{
    match "^ns[.]{z.replace('.', '[.]')}[.]$"
    answer "{{{{ .Name }}}} {TTL} IN A {plan.WHOAMI_AUTH_SERVER}"
    fallthrough
  }}
  template IN A {z} {{
    answer "{{{{ .Name }}}} 0 IN A {{{{ .Remote }}}}"
  }}
  template IN NS {z} {{
    match "^{z.replace('.', '[.]')}[.]$"
    answer "{z}. {TTL} IN NS {WHOAMI_NS}."
    fallthrough
  }}
  template IN SOA {z} {{
    match "^{z.replace('.', '[.]')}[.]$"
    answer "{soa}"
    fallthrough
  }}
  template IN ANY {z} {{
    authority "{soa}"
  }}
}}
"""
