"""The testbed's fixed address and name plan.

Everything here lives inside network namespaces that dnscamp creates (prefix ``dc-``); no
address of this plan is ever configured in the root namespace, so no testbed packet can leave
the machine. Other modules import these constants instead of repeating addresses; the live
description of a running testbed (client addresses, links, URLs) comes from
``dnscamp testbed info --json``.
"""

from __future__ import annotations

PREFIX = "dc-"

# --- namespaces -------------------------------------------------------------------------
CLIENT_NS = "dc-client-{profile}"  # one per access profile: browsers, DNS tools, stubs
ACCESS_LINK_NS = "dc-la-{profile}"  # router namespace that emulates the access link
ISP_NS = "dc-isp"  # ISP router + ISP recursive resolver (one access link from clients)
BACKBONE_LINK_NS = "dc-lb"  # router namespace that emulates the backbone link isp <-> core
CORE_NS = "dc-core"  # core router; servers hang off it without extra delay
PUBLIC_LINK_NS = "dc-lp"  # router namespace for the extra delay core <-> public resolver
PUBRES_NS = "dc-pubres"  # the "public" resolver, further away than the ISP resolver
DNS_NS = "dc-dns"  # root, test. TLD, site and whoami authoritative servers
WEB_NS = "dc-web"  # Caddy: the generated web sites (H1/H2/H3)

# --- service addresses (IPv4, /32 on the service namespace's loopback) -------------------
ISP_RESOLVER = "10.53.1.1"  # CoreDNS frontend (all five transports) -> Unbound in dc-isp
PUBLIC_RESOLVER = "10.53.2.1"  # CoreDNS frontend -> Unbound in dc-pubres
ROOT_SERVER = "10.53.0.1"  # authoritative for "."
TLD_SERVER = "10.53.0.2"  # authoritative for "test."
SITES_AUTH_SERVER = "10.53.0.3"  # authoritative for every site zone under test.
WHOAMI_AUTH_SERVER = "10.53.0.4"  # authoritative for whoami.test. (+ query log)
WEB_SUBNET = "10.80.0.0/16"  # web server addresses (one or more per site host)
PROBE_SUBNET = "10.90.0.0/16"  # Atlas-like probes and their ISP resolvers
CLIENT_SUBNET = "10.10.0.0/16"  # client <-> access-link router <-> isp, per profile
FLEET_SUBNET = "10.91.0.0/16"  # rehearsed fleet instances and their S3 server (dnscamp fleet rehearse)

# --- names ---------------------------------------------------------------------------------
TLD = "test"
ISP_RESOLVER_NAME = "isp-resolver.test"  # TLS name of the ISP resolver frontend
PUBLIC_RESOLVER_NAME = "public-resolver.test"  # TLS name of the public resolver frontend
WHOAMI_ZONE = "whoami.test"

# --- ports used by the encrypted-DNS frontends (standard ports) ----------------------------
PORTS = {"do53": 53, "dot": 853, "doh": 443, "doh3": 443, "doq": 853}
