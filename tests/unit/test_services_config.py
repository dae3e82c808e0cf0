"""Generated server configs (testbed/services): Corefiles, Unbound, Caddy, catalog entries."""

from __future__ import annotations

import subprocess

import pytest

from testbed import plan
from testbed.services import dns_hierarchy, frontends, resolvers, sites, web
from tests.tools import require

SERVERS = "install/40-testbed-servers.sh"

pytestmark = pytest.mark.unit


def test_frontend_corefile_serves_five_transports_without_cache(tmp_path):
    r = resolvers.RESOLVERS[0]
    cf = frontends.corefile(r, tmp_path / "c.crt", tmp_path / "c.key")
    for scheme, port in (("dns", 53), ("tls", 853), ("https", 443), ("https3", 443), ("quic", 853)):
        assert f"{scheme}://.:{port} {{" in cf
    assert cf.count(f"bind {r.address}") == 5
    assert cf.count("forward . 127.0.0.1:5353") == 5
    assert "cache" not in cf
    for tr in frontends.SCHEMES:
        assert f'log . "{tr} {{remote}}' in cf


# CoreDNS's server-block scheme per transport (CoreDNS manual, "Server Blocks"), and the IANA
# service each transport's port is registered for (/etc/services: RFC 1035, RFC 7858/9250, RFC 8484)
COREDNS_SCHEME = {"do53": "dns", "dot": "tls", "doh": "https", "doh3": "https3", "doq": "quic"}
IANA_SERVICE = {"do53": ("domain", "udp"), "dot": ("domain-s", "tcp"), "doq": ("domain-s", "udp"),
                "doh": ("https", "tcp"), "doh3": ("https", "udp")}


@pytest.mark.parametrize("r", resolvers.RESOLVERS, ids=lambda r: r.key)
def test_catalog_entry_is_what_the_server_serves(r, tmp_path):
    """The catalog entry the agent reads is checked against independent sources, not a pasted
    copy of itself: the Corefile CoreDNS is started with (scheme, port, bind address of every
    server block), the IANA port registry, and the agent's own catalog loader."""
    import re
    import socket

    from vantage_agent.dns import catalog

    entry = frontends.endpoints(r)
    assert entry["name"] == f"testbed-{r.key}" and set(entry["endpoints"]) == set(COREDNS_SCHEME)
    cf = frontends.corefile(r, tmp_path / "c.crt", tmp_path / "c.key")
    blocks = {m[0]: (int(m[1]), m[2]) for m in re.findall(r"^(\w+)://\.:(\d+) \{\n  bind (\S+)\n", cf, re.M)}
    loaded = catalog.testbed_resolvers({"resolvers": [entry], "ca_file": str(tmp_path / "ca.pem")})[entry["name"]]
    for tr, ep in entry["endpoints"].items():
        assert (ep["port"], ep["address"]) == blocks[COREDNS_SCHEME[tr]], (tr, ep, blocks)
        assert ep["port"] == socket.getservbyname(*IANA_SERVICE[tr]), (tr, ep)
        if tr != "do53":
            assert ep["tls_name"] == r.tls_name
        if tr in ("doh", "doh3"):
            assert ep["url"] == f"https://{r.tls_name}/dns-query"  # CoreDNS answers DoH on /dns-query only
        got = loaded.endpoint(tr)
        assert (got.address, got.port) == (ep["address"], ep["port"])


def test_unbound_config(tmp_path):
    r = resolvers.RESOLVERS[1]
    conf = resolvers.write_config(r, tmp_path)
    text = conf.read_text()
    assert f"outgoing-interface: {r.address}" in text and "interface: 127.0.0.1@5353" in text
    assert 'local-zone: "test." nodefault' in text and 'module-config: "iterator"' in text
    assert f"{plan.ROOT_SERVER}" in (tmp_path / "root.hints").read_text()
    # Unbound's own parser is the oracle for the syntax (a missing tool is a broken install)
    p = subprocess.run([require("unbound-checkconf", SERVERS), str(conf)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_auth_and_whoami_corefiles(tmp_path):
    gen = sites.generate()
    files = dns_hierarchy.write_zones(gen, tmp_path)
    cf = dns_hierarchy.auth_corefile(gen, files)
    assert f"bind {plan.ROOT_SERVER}" in cf and f"bind {plan.TLD_SERVER}" in cf
    assert cf.count(f"bind {plan.SITES_AUTH_SERVER}") == len(gen.zones())
    w = dns_hierarchy.whoami_corefile()
    assert f"bind {plan.WHOAMI_AUTH_SERVER}" in w and "{{ .Remote }}" in w and "whoami" in w.split("\n")[0]


def test_caddyfile_binds_each_host_and_sets_timing_allow_origin(tmp_path):
    gen = sites.generate()
    certs = {h: (tmp_path / f"{h}.crt", tmp_path / f"{h}.key") for h in gen.hosts}
    cf = web.caddyfile(gen, tmp_path / "root", certs, tmp_path)
    assert "protocols h1 h2 h3" in cf and "admin off" in cf
    for h in gen.hosts.values():
        assert f"https://{h.name} {{\n  bind {h.address}\n" in cf
    assert cf.count('Timing-Allow-Origin "*"') == len(gen.hosts)
    caddy = require("caddy", SERVERS)
    f = tmp_path / "Caddyfile"
    f.write_text(cf)
    p = subprocess.run([caddy, "adapt", "--adapter", "caddyfile", "--config", str(f)], capture_output=True,
                       text=True, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr[-2000:]
