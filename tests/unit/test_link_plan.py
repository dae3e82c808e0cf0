"""`dnscamp link` logic without touching the network: the netem plan, the linkem chains, excludes,
backend choice, the default device, and the CLI's refusals (one line, exit 2)."""

from __future__ import annotations

import ipaddress
import json
import subprocess

import pytest
from typer.testing import CliRunner

from dnscamp.commands import link as cli
from testbed.linkem import driver, host
from testbed.profiles import load_profiles

pytestmark = pytest.mark.unit

EXCL = host.parse_excludes(["169.254.169.254/32", "fd00:ec2::254/128"])


def _joined(cmds):
    return [" ".join(c) for c in cmds]


def test_netem_plan_4g_www_both_directions_and_excludes():
    cmds = _joined(host.netem_plan("ens5", load_profiles()["4g-www"], EXCL))
    # egress: every priority to band 2 (netem, the uplink), excluded destinations to band 1
    assert cmds[0] == "tc qdisc replace dev ens5 root handle 1dc: prio bands 2 priomap " + " ".join(["1"] * 16)
    up = cmds[1]
    assert up.startswith("tc qdisc replace dev ens5 parent 1dc:2 handle 1dd: netem delay 53300us 1000us ")
    assert "loss random 0.5% rate 7440kbit 24 limit" in up and "packetoverhead" not in up
    assert cmds[2] == "tc filter add dev ens5 parent 1dc: protocol ip pref 1 u32 match ip dst 169.254.169.254/32 flowid 1dc:1"
    assert cmds[3] == "tc filter add dev ens5 parent 1dc: protocol ipv6 pref 2 u32 match ip6 dst fd00:ec2::254/128 flowid 1dc:1"
    # ingress: through an ifb whose root is netem with the downlink (rate only: WWW'20 delayed the uplink)
    assert cmds[4:6] == ["ip link add dcifb-ens5 type ifb", "ip link set dcifb-ens5 up"]
    assert cmds[6].startswith("tc qdisc replace dev dcifb-ens5 root handle 1de: netem rate 22100kbit 24 limit")
    assert "delay" not in cmds[6] and "loss" not in cmds[6]
    assert cmds[7] == "tc qdisc replace dev ens5 handle ffff: ingress"
    excl_in, redirect = cmds[8:10], cmds[10]
    assert [int(c.split(" pref ")[1].split()[0]) for c in excl_in] == [0xDC01, 0xDC02]
    assert "match ip src 169.254.169.254/32 flowid ffff:1" in excl_in[0] and "match ip6 src fd00:ec2::254/128" in excl_in[1]
    assert redirect.endswith(f"pref {0xDCFF} u32 match u32 0 0 action mirred egress redirect dev dcifb-ens5")


def test_netem_params_are_the_testbeds():
    """One implementation: the host's netem options are driver.netem_argv's (overhead positional)."""
    for name, prof in load_profiles().items():
        for cfg in prof.link_config():
            tb = driver.netem_argv("x", cfg)[7:]
            assert host.netem_params(cfg) == tb, name


def test_symmetric_profile_splits_rtt():
    cmds = _joined(host.netem_plan("eth0", load_profiles()["dsl"], []))
    assert "netem delay 21200us rate 800kbit 24" in cmds[1] and "netem delay 21200us rate 10700kbit 24" in cmds[4]
    assert not any("filter" in c and "1dc:" in c for c in cmds)  # no excludes: no bypass filters


def test_linkem_chain_rules():
    out = host.iptables_chain_rules(host.CHAINS["out"], EXCL, 4, 7)
    assert out == [["-A", "DNSCAMP-LINK-OUT", "-d", "169.254.169.254/32", "-j", "RETURN"],
                   ["-A", "DNSCAMP-LINK-OUT", "-j", "NFQUEUE", "--queue-num", "7"]]
    inn = host.iptables_chain_rules(host.CHAINS["in"], EXCL, 6, 8)
    assert inn == [["-A", "DNSCAMP-LINK-IN", "-s", "fd00:ec2::254/128", "-j", "RETURN"],
                   ["-A", "DNSCAMP-LINK-IN", "-j", "NFQUEUE", "--queue-num", "8"]]


def test_default_excludes_keep_the_amazon_resolver_shaped():
    nets = host.parse_excludes(list(host.DEFAULT_EXCLUDES))
    assert any(ipaddress.ip_address("169.254.169.254") in n for n in nets)
    assert not any(ipaddress.ip_address("169.254.169.253") in n for n in nets if n.version == 4)


def test_parse_excludes_names_the_bad_one():
    assert [str(n) for n in host.parse_excludes(["10.0.0.7", "10.1.2.3/8"])] == ["10.0.0.7/32", "10.0.0.0/8"]
    with pytest.raises(host.HostLinkError, match=r"--exclude 'nope': not an IPv4/IPv6"):
        host.parse_excludes(["10.0.0.0/8", "nope"])


def test_resolve_backend(monkeypatch):
    monkeypatch.setattr(host.shutil, "which", lambda t: f"/usr/sbin/{t}")
    monkeypatch.setattr(driver, "detect_backend", lambda: "nfqueue")
    assert host.resolve_backend("auto") == "linkem" and host.resolve_backend("linkem") == "linkem"
    with pytest.raises(host.HostLinkError, match="sch_netem is not available"):
        host.resolve_backend("netem")
    monkeypatch.setattr(driver, "detect_backend", lambda: "netem")
    assert host.resolve_backend("auto") == "netem" and host.resolve_backend("netem") == "netem"
    with pytest.raises(host.HostLinkError, match="--backend 'tbf'"):
        host.resolve_backend("tbf")
    monkeypatch.setattr(host.shutil, "which", lambda t: None)
    with pytest.raises(host.HostLinkError, match=r"^tc not found on PATH"):
        host.resolve_backend("auto")


def test_default_dev(monkeypatch):
    routes = {"-4": [], "-6": [{"dst": "default", "gateway": "fe80::1", "dev": "ens5"}]}
    monkeypatch.setattr(host, "_run", lambda argv, check=True: subprocess.CompletedProcess(argv, 0, json.dumps(routes[argv[2]]), ""))
    assert host.default_dev() == "ens5"
    routes["-4"] = [{"dst": "default", "gateway": "172.31.0.1", "dev": "eth0"}]
    assert host.default_dev() == "eth0"
    routes["-4"] = routes["-6"] = []
    with pytest.raises(host.HostLinkError, match="no default route: name the interface with --dev"):
        host.default_dev()


@pytest.mark.parametrize(("args", "message"), [
    (["apply", "5g-dream"], "dnscamp: unknown profile '5g-dream' (known: 3g, 4g,"),
    (["apply", "4g", "--backend", "tbf"], "dnscamp: --backend 'tbf': expected auto, netem or linkem"),
])
def test_cli_refusals_one_line_exit_2(args, message, monkeypatch):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)
    r = CliRunner().invoke(cli.app, args)
    assert r.exit_code == 2 and r.stderr.startswith(message) and r.stderr.count("\n") == 1, r.stderr


def test_cli_missing_tc(monkeypatch):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)
    monkeypatch.setattr(host.shutil, "which", lambda t: None)
    r = CliRunner().invoke(cli.app, ["apply", "4g", "--backend", "netem"])
    assert r.exit_code == 2 and r.stderr == "dnscamp: tc not found on PATH (apt-get install iproute2)\n"


def test_cli_spec_profiles(tmp_path, monkeypatch):
    """--spec adds the campaign's own [profiles] (the user data writes the spec to the instance)."""
    spec = tmp_path / "c.toml"
    spec.write_text('[profiles.slow-sat]\nsource = "test"\nrtt_ms = 600\ndown_mbps = 10\n')
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)  # stop right after the profile is found
    r = CliRunner().invoke(cli.app, ["apply", "slow-sat", "--spec", str(spec)])
    assert r.exit_code == 2 and "needs root" in r.stderr, r.stderr
    r = CliRunner().invoke(cli.app, ["apply", "slow-sat"])
    assert "unknown profile 'slow-sat'" in r.stderr


def test_cli_is_wired():
    from dnscamp.cli import app

    assert any(g.name == "link" and g.typer_instance is cli.app for g in app.registered_groups)
