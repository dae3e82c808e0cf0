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


def test_catalog_entry():
    isp = frontends.endpoints(resolvers.RESOLVERS[0])
    assert isp == {
        "name": "testbed-isp",
        "endpoints": {
            "do53": {"address": "10.53.1.1", "port": 53},
            "dot": {"address": "10.53.1.1", "port": 853, "tls_name": "isp-resolver.test"},
            "doh": {"url": "https://isp-resolver.test/dns-query", "address": "10.53.1.1", "port": 443,
                    "tls_name": "isp-resolver.test"},
            "doh3": {"url": "https://isp-resolver.test/dns-query", "address": "10.53.1.1", "port": 443,
                     "tls_name": "isp-resolver.test"},
            "doq": {"address": "10.53.1.1", "port": 853, "tls_name": "isp-resolver.test"},
        },
    }


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
