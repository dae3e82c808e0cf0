"""Page-load engine, pure parts: DNS-mode parsing, order, HAR building/validation, error
taxonomy, record body, the CLI's input errors."""

import json

import pytest

from vantage_agent import errors
from vantage_agent.kind import Unit
from vantage_agent.pageload import dnsmode, har
from vantage_agent.pageload.common import LoadOptions, LoadResult, classify_error_text, classify_exception
from vantage_agent.pageload.kind import PageLoadParams, body_of, combinations, origins_for, verify
from vantage_agent.records import BODIES, Vantage, parse_record
from vantage_agent.kind import make_record
from vantage_agent.records.page_load import PageLoadBody

pytestmark = pytest.mark.unit


def _frontend(name: str, addr: str, tls: str, log: str) -> dict:
    url = f"https://{tls}/dns-query"
    return {"name": name, "query_log": log, "endpoints": {
        "do53": {"address": addr, "port": 53}, "dot": {"address": addr, "port": 853, "tls_name": tls},
        "doh": {"url": url, "address": addr, "port": 443, "tls_name": tls},
        "doh3": {"url": url, "address": addr, "port": 443, "tls_name": tls},
        "doq": {"address": addr, "port": 853, "tls_name": tls}}}


# A testbed description as `dnscamp testbed info --json` / ctx.testbed give it (servers under
# "services"), written out here: the agent must get every testbed address from it.
TB = {"up": True, "services": {"running": True, "ca_file": "/tb/ca/ca.crt", "resolvers": {
    "isp": _frontend("testbed-isp", "10.53.1.1", "isp-resolver.test", "/tb/logs/frontend-isp.log"),
    "public": _frontend("testbed-public", "10.53.2.1", "public-resolver.test", "/tb/logs/frontend-public.log")}}}


def test_parse_modes():
    assert dnsmode.parse("system").transport == "system"
    m = dnsmode.parse("dot:isp", testbed=TB)
    assert (m.transport, m.resolver.address, m.resolver.port, m.resolver.tls_name) == ("dot", "10.53.1.1", 853, "isp-resolver.test")
    m = dnsmode.parse("doh:https://dns.test:8443/q@127.0.0.9")
    assert m.resolver.doh_url == "https://dns.test:8443/q" and m.resolver.address == "127.0.0.9"
    m = dnsmode.parse("doq:name.test@10.0.0.1:8853")
    assert (m.resolver.address, m.resolver.port, m.resolver.tls_name) == ("10.0.0.1", 8853, "name.test")
    assert dnsmode.parse("do53:public", testbed=TB).resolver.address == "10.53.2.1"


def test_aliases_come_from_the_description_not_from_the_testbed_package(tmp_path):
    """Another island (other addresses, ports, names) is used as described; without a
    description the alias parses (a spec validates anywhere) but cannot be set up."""
    other = _frontend("testbed-isp", "192.0.2.7", "r.example", "/x.log")
    other["endpoints"]["doq"]["port"] = 8853
    m = dnsmode.parse("doq:isp", testbed={"services": {"resolvers": {"isp": other}}})
    assert (m.resolver.address, m.resolver.port, m.resolver.tls_name) == ("192.0.2.7", 8853, "r.example")
    bare = dnsmode.parse("dot:isp")
    assert bare.resolver is None and bare.alias == "isp" and str(bare) == "dot:isp"
    with pytest.raises(dnsmode.DnsModeError, match="testbed description"):
        dnsmode.setup(bare, tmp_path)
    no_doq = {"services": {"resolvers": {"isp": {"name": "testbed-isp", "endpoints": {"do53": {"address": "10.53.1.1"}}}}}}
    assert dnsmode.parse("doq:isp", testbed=no_doq).resolver is None
    with pytest.raises(dnsmode.DnsModeError, match="isp"):
        dnsmode.parse("doh:isp", testbed={"resolvers": {"isp": {"name": "x", "endpoints": {"doh": {"address": "1.2.3.4"}}}}})


def test_the_testbed_describes_what_the_agent_reads(tmp_path):
    """The producer side: the description the testbed writes resolves the aliases to its own
    plan's frontends, and names the logs its supervisor writes for them."""
    from testbed import plan
    from testbed.services import resolvers_description
    from testbed.supervisor import Supervisor
    from vantage_agent.pageload.kind import FrontendLogs

    tb = {"up": True, "services": {"running": True, "resolvers": resolvers_description(tmp_path)}}
    for alias, addr, name in (("isp", plan.ISP_RESOLVER, plan.ISP_RESOLVER_NAME),
                              ("public", plan.PUBLIC_RESOLVER, plan.PUBLIC_RESOLVER_NAME)):
        for t in ("do53", "dot", "doh", "doq", "doh3"):
            r = dnsmode.parse(f"{t}:{alias}", testbed=tb).resolver
            assert (r.address, r.port, r.tls_name) == (addr, plan.PORTS[t], None if t == "do53" else name), (t, alias)
    assert dnsmode.parse("doh:isp", testbed=tb).resolver.doh_url == f"https://{plan.ISP_RESOLVER_NAME}/dns-query"
    assert FrontendLogs(tb).paths == sorted(Supervisor(tmp_path).log_path(f"frontend-{k}") for k in ("isp", "public"))


def test_ca_and_frontend_logs_come_from_the_description(tmp_path, monkeypatch):
    from vantage_agent.pageload.kind import FrontendLogs, find_ca

    # A CA where the testbed keeps it ($DNSCAMP_HOME/testbed/ca) is not guessed at: only the
    # description (or the spec) names the trust anchor.
    monkeypatch.setenv("DNSCAMP_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "testbed" / "ca").mkdir(parents=True)
    (tmp_path / "home" / "testbed" / "ca" / "ca.crt").write_text("guessed")
    assert find_ca(None, None) is None
    ca = tmp_path / "ca.crt"
    ca.write_text("pem")
    assert find_ca(None, {"services": {**TB["services"], "ca_file": str(ca)}}) == str(ca)
    assert find_ca("/spec.pem", TB) == "/spec.pem"
    assert find_ca(None, TB) is None  # named but absent: no trust anchor, not a wrong one
    assert [str(p) for p in FrontendLogs(TB).paths] == ["/tb/logs/frontend-isp.log", "/tb/logs/frontend-public.log"]
    assert FrontendLogs(None).paths == [] and FrontendLogs({"services": {"resolvers": [{"endpoints": {}}]}}).paths == []


@pytest.mark.parametrize("bad", ["dns", "dot:", "do54:isp", "doh:example.com", "dot:not-an-ip", "doh:https://x.test/q"])
def test_parse_rejects(bad):
    with pytest.raises(dnsmode.DnsModeError):
        dnsmode.parse(bad)


def test_stubby_config_is_dot_only_with_auth():
    r = dnsmode.parse("dot:isp", testbed=TB).resolver
    y = dnsmode.stubby_config("127.53.0.2", r, "/ca.crt")
    assert "GETDNS_TRANSPORT_TLS" in y and "GETDNS_TRANSPORT_UDP" not in y
    assert "GETDNS_AUTHENTICATION_REQUIRED" in y and 'tls_auth_name: "isp-resolver.test"' in y
    assert "idle_timeout: 10000" in y and "127.53.0.2" in y


def test_firefox_doh_is_trr_mode_3():
    p = dnsmode.firefox_trr_prefs(dnsmode.parse("doh:isp", testbed=TB).resolver)
    assert p["network.trr.mode"] == 3 and p["network.trr.uri"] == "https://isp-resolver.test/dns-query"
    assert p["network.trr.bootstrapAddr"] == "10.53.1.1"


def test_combinations_are_seeded_and_complete():
    p = PageLoadParams(urls=["https://a.test/"], dns=["system", "do53:isp", "doh:isp"], http=["h2", "h3"])
    a, b, c = combinations(p, 7), combinations(p, 7), combinations(p, 8)
    assert a == b and a != c
    assert sorted(a) == sorted((x, d, h) for x in ("firefox", "chromium") for d in p.dns for h in p.http)


def test_params_reject_bad_mode_and_url():
    with pytest.raises(ValueError, match="dot:nowhere"):
        PageLoadParams(urls=["https://a.test/"], dns=["dot:nowhere"])
    with pytest.raises(ValueError, match="not an http"):
        PageLoadParams(urls=["ftp://a.test/"])


def test_origins_for():
    assert origins_for("https://www.site.test/js", ["h1.site.test:443"]) == ("www.site.test:443", "h1.site.test:443")


CDP = [
    {"method": "Network.requestWillBeSent", "params": {"requestId": "1", "loaderId": "1", "type": "Document", "timestamp": 100.0, "wallTime": 1700000000.0, "request": {"url": "https://www.site.test/js", "method": "GET", "headers": {"a": "b"}}}},
    {"method": "Network.responseReceived", "params": {"requestId": "1", "response": {"url": "https://www.site.test/js", "status": 200, "statusText": "", "headers": {"content-type": "text/html"}, "mimeType": "text/html", "protocol": "h2", "remoteIPAddress": "10.80.0.1", "connectionId": 7, "timing": {"requestTime": 100.001, "dnsStart": 0.5, "dnsEnd": 2.5, "connectStart": 2.5, "connectEnd": 10.0, "sslStart": 4.0, "sslEnd": 10.0, "sendStart": 10.1, "sendEnd": 10.2, "receiveHeadersEnd": 15.0}}}},
    {"method": "Network.loadingFinished", "params": {"requestId": "1", "timestamp": 100.020, "encodedDataLength": 900}},
    {"method": "Network.requestWillBeSent", "params": {"requestId": "2", "loaderId": "1", "type": "Script", "timestamp": 100.03, "wallTime": 1700000000.03, "request": {"url": "https://h1.site.test/a.js?x=1", "method": "GET", "headers": {}}}},
    {"method": "Network.loadingFailed", "params": {"requestId": "2", "timestamp": 100.05, "errorText": "net::ERR_NAME_NOT_RESOLVED"}},
]


def test_har_from_cdp_is_valid_and_timed():
    res = LoadResult(url="https://www.site.test/js", browser="chromium", navigation={"loadEventStart": 30.0, "domContentLoadedEventStart": 20.0}, time_origin_ms=1.7e12)
    h = har.from_cdp(CDP, res.url, res, "156")
    assert har.validate(h) == []
    e = h["log"]["entries"][0]
    assert e["timings"]["dns"] == 2.0 and e["timings"]["ssl"] == 6.0 and e["response"]["httpVersion"] == "HTTP/2"
    assert e["serverIPAddress"] == "10.80.0.1"
    assert h["log"]["entries"][1]["_error"] == "net::ERR_NAME_NOT_RESOLVED"
    assert h["log"]["pages"][0]["pageTimings"]["onLoad"] == 30.0
    assert har.unique_names(h) == ["h1.site.test", "www.site.test"]


def test_har_from_bidi_pairs_out_of_order_events():
    req = {"request": "r1", "url": "https://www.site.test/", "method": "GET", "headers": [{"name": "a", "value": {"type": "string", "value": "b"}}],
           "timings": {"timeOrigin": 1.7e12, "fetchStart": 1.0, "dnsStart": 1.0, "dnsEnd": 3.0, "connectStart": 3.0, "tlsStart": 4.0, "connectEnd": 8.0, "requestStart": 8.0, "responseStart": 12.0, "responseEnd": 14.0}}
    evs = [
        ("network.responseCompleted", {"request": req, "redirectCount": 0, "response": {"protocol": "h3", "status": 200, "statusText": "OK", "headers": [], "mimeType": "text/html", "content": {"size": 10}, "bodySize": 10, "headersSize": 50}}),
        ("network.beforeRequestSent", {"request": req, "redirectCount": 0, "timestamp": 1.7e12}),
    ]
    h = har.from_bidi(evs, "https://www.site.test/", LoadResult(url="x", browser="firefox"), "153")
    assert har.validate(h) == []
    t = h["log"]["entries"][0]["timings"]
    assert (t["dns"], t["connect"], t["ssl"], t["wait"], t["receive"]) == (2.0, 5.0, 4.0, 4.0, 2.0)
    assert h["log"]["entries"][0]["response"]["httpVersion"] == "HTTP/3"


def test_har_validation_catches_missing_fields():
    h = {"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}, "entries": [{"startedDateTime": "nope"}]}}
    problems = har.validate(h)
    assert problems and any("startedDateTime" in p or "request" in p for p in problems)


def test_error_taxonomy_from_browser_texts():
    assert classify_error_text("net::ERR_NAME_NOT_RESOLVED").status == "dns_error"
    assert classify_error_text("Reached error page: about:neterror?e=dnsNotFound&u=x").status == "dns_error"
    assert classify_error_text("net::ERR_CONNECTION_REFUSED").status == "other"
    from selenium.common.exceptions import InvalidSessionIdException, TimeoutException, WebDriverException

    assert classify_exception(TimeoutException("Timed out receiving message from renderer")).status == "page_load_timeout"
    assert classify_exception(InvalidSessionIdException("invalid session id")).status == "driver_error"
    assert classify_exception(WebDriverException("chrome not reachable")).status == "driver_error"
    assert classify_exception(WebDriverException("unknown error: net::ERR_NAME_NOT_RESOLVED")).status == "dns_error"
    for s in ("ok", "page_load_timeout", "dns_error", "driver_error", "other"):
        assert s in errors.statuses()


def test_metrics_and_body_round_trip_through_the_record_contract():
    nav = {"name": "https://www.site.test/js", "domainLookupStart": 1.0, "domainLookupEnd": 2.0, "loadEventStart": 55.5, "nextHopProtocol": "h2"}
    resources = [{"name": "https://h1.site.test/a.js", "initiatorType": "script", "nextHopProtocol": "h3", "domainLookupStart": 10.0, "domainLookupEnd": 12.0, "startTime": 9.0}]
    res = LoadResult(url="https://www.site.test/js", browser="chromium", navigation=nav, resources=resources,
                     paint={"first-paint": 20.0, "first-contentful-paint": 21.0}, lcp_ms=30.0, versions={"browser_version": "156"})
    mode = dnsmode.parse("doq:isp")
    stub = {"queries": 4, "failures": 0, "names": ["www.site.test", "h1.site.test"], "answered": ["www.site.test", "h1.site.test"]}
    body = body_of(res, mode, LoadOptions(), har_path="har/x.har", har_valid=True, stub_stats=stub, rtt={"10.53.1.1": 1.2}, order={"seed": 1})
    assert body.plt_ms == 55.5 and body.dns_lookups == 2 and body.unique_hostnames == 2
    assert body.protocols == {"h2": 1, "h3": 1} and body.dns_transport_verified is True
    assert BODIES["page_load"] is PageLoadBody
    unit = Unit(id="u", campaign="c", run="r", kind="page_load", vantage=Vantage(id="v", provider="testbed"), target=res.url, repetition=0, params={}, seed=1)
    rec = make_record(unit, started_at=__import__("datetime").datetime.now(__import__("datetime").timezone.utc), body=body)
    env, parsed = parse_record(json.loads(rec.to_json()))
    assert parsed.plt_ms == 55.5 and env.kind == "page_load"


def test_verify_needs_page_names_in_the_stub():
    m = dnsmode.parse("doh3:isp")
    assert verify(m, ["www.site.test"], {"queries": 3, "failures": 0, "names": ["other.test"]})[0] is False
    assert verify(dnsmode.parse("system"), ["a"], None)[0] is None


def test_verify_counts_a_failed_forward_only_when_a_page_name_stayed_unanswered():
    m = dnsmode.parse("doq:isp")
    retried = {"queries": 5, "failures": 1, "names": ["www.site.test", "h1.site.test"],
               "answered": ["www.site.test", "h1.site.test"], "errors": ["Timeout: 5s"]}
    ok, how = verify(m, ["www.site.test", "h1.site.test"], retried)
    assert ok is True and "1 failed (Timeout: 5s)" in how
    lost = dict(retried, answered=["www.site.test"])
    ok, how = verify(m, ["www.site.test", "h1.site.test"], lost)
    assert ok is False and "h1.site.test" in how


def test_cli_rejects_bad_mode_with_exit_2():
    from typer.testing import CliRunner

    from dnscamp.cli import app

    r = CliRunner().invoke(app, ["pageload", "--dns", "dot:nowhere", "https://a.test/"])
    assert r.exit_code == 2 and "--dns" in (r.stderr if hasattr(r, "stderr") else r.output)
    r = CliRunner().invoke(app, ["pageload", "--browser", "lynx", "https://a.test/"])
    assert r.exit_code == 2


def test_frontend_log_lines_parse_with_or_without_level_prefix():
    from vantage_agent.pageload.kind import parse_log_line

    line = "doq 10.10.1.2:51234 A IN www.single.test. udp 45 NOERROR 61 0.000812s"
    assert parse_log_line("[INFO] " + line)[:5] == ["doq", "10.10.1.2:51234", "A", "IN", "www.single.test."]
    assert parse_log_line(line)[0] == "doq"


def test_testbed_sites_from_a_local_vantage_are_setup_errors_at_once(tmp_path):
    from vantage_agent.kind import RunContext
    from vantage_agent.pageload.kind import KIND

    unit = Unit(id="u", campaign="c", run="r", kind="page_load", vantage=Vantage(id="local", provider="local"),
                target="https://www.single.test/", repetition=0, seed=5,
                params={"urls": ["https://www.single.test/"], "dns": ["system", "doq:isp"]})
    recs = list(KIND.run(unit, RunContext(spool_dir=tmp_path, artifacts_dir=tmp_path)))
    assert len(recs) == 4 and {r.status for r in recs} == {"setup_error"}
    assert "testbed" in recs[0].error


def test_cli_refuses_testbed_names_outside_the_testbed(monkeypatch):
    from typer.testing import CliRunner

    from dnscamp.cli import app

    monkeypatch.delenv("DNSCAMP_NETNS", raising=False)
    r = CliRunner().invoke(app, ["pageload", "https://www.single.test/"])
    assert r.exit_code == 2 and "--testbed-client" in r.output
    r = CliRunner().invoke(app, ["pageload", "--dns", "dot:isp", "https://example.org/"])
    assert r.exit_code == 2 and "testbed resolver" in r.output
