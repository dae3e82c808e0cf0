"""Spec validation, credit pricing, dry-run requests, the backoff policy (fake clock), the key."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atlas import dns as atlas_dns
from atlas import key as keymod
from atlas import ping as atlas_ping
from atlas.client import Backoff
from atlas.plan import PlanError, plan, plan_resolver_pings
from atlas.spec import SpecError, load_spec, parse_spec

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "atlas" / "examples" / "quicsocks-de.toml"
BASE = {"name": "t", "server": "192.0.2.10", "sources": [{"country": "DE", "requested": 10}],
        "zone": {"name": "dnstest.example.com"}}


def spec(**over):
    d = json.loads(json.dumps(BASE))
    d.update(over)
    return parse_spec(d)


def test_prices_follow_the_atlas_cost_model():
    assert atlas_ping.unit_cost(3, 48, oneoff=False) == 3  # the documented default
    assert atlas_ping.unit_cost(5, 48, oneoff=True) == 10  # one-off results cost twice
    assert atlas_ping.unit_cost(2, 1500, oneoff=False) == 4  # int(S/1500) + 1 = 2
    assert atlas_dns.unit_cost("UDP", oneoff=False) == 10 and atlas_dns.unit_cost("TCP", oneoff=False) == 20
    assert atlas_dns.unit_cost("udp", oneoff=True) == 20


def test_plan_requests_and_credit_total():
    p = plan(spec(), label="rfixed")
    (req,) = p.requests
    assert req.method == "POST" and req.url == "https://atlas.ripe.net/api/v2/measurements/"
    dns, ping = req.body["definitions"]
    assert dns["type"] == "dns" and dns["use_probe_resolver"] is True and dns["prepend_probe_id"] is True
    assert dns["query_argument"] == "rfixed.dnstest.example.com" and dns["set_rd_bit"] is True
    assert ping == {**ping, "type": "ping", "target": "192.0.2.10", "packets": 5}
    assert req.body["probes"] == [{"requested": 10, "type": "country", "value": "DE"}]
    assert req.roles == ["resolver_dns", "probe_server"]
    assert p.credits_phase1 == 10 * (20 + 10) and p.credits_phase2_estimate == 10 * 10
    assert p.credits_total == 400


def test_whoami_alternative_and_tags_and_probe_list():
    s = spec(zone={"whoami": "whoami.akamai.net"},
             sources=[{"probes": [1, 2, 3]}, {"asn": 3320, "requested": 4, "tags": {"include": ["home"]}}])
    p = plan(s)
    dns = p.requests[0].body["definitions"][0]
    assert dns["query_argument"] == "whoami.akamai.net" and dns["prepend_probe_id"] is False
    assert p.requests[0].body["probes"][0] == {"requested": 3, "type": "probes", "value": "1,2,3"}
    assert p.requests[0].body["probes"][1]["tags"] == {"include": ["home"], "exclude": []}
    assert p.credits_phase1 == 7 * 30


def test_phase_two_groups_probes_by_resolver():
    reqs = plan_resolver_pings(spec(), {1: "198.51.100.1", 2: "198.51.100.1", 3: "198.51.100.9"})
    assert [r.body["definitions"][0]["target"] for r in reqs] == ["198.51.100.1", "198.51.100.9"]
    assert reqs[0].body["probes"] == [{"requested": 2, "type": "probes", "value": "1,2"}]
    assert sum(r.credits for r in reqs) == 3 * 10


@pytest.mark.parametrize(
    "over,field",
    [
        ({"server": "not-an-ip"}, "server"),
        ({"sources": [{"country": "Germany"}]}, "sources.0"),
        ({"sources": [{"country": "DE", "asn": 3}]}, "exactly one of"),
        ({"zone": {"name": "a.b", "whoami": "c.d"}}, "zone"),
        ({"ping": {"packets": 50}}, "ping.packets"),
        ({"server": "2001:db8::1"}, "IPv4"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_specs_name_the_field(over, field):
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        spec(**over)


def test_max_credits_refuses_before_spending():
    with pytest.raises(PlanError, match="max_credits"):
        plan(spec(max_credits=100))


def test_cli_dry_run_prints_the_exact_requests_and_total():
    from dnscamp.cli import app

    r = CliRunner().invoke(app, ["atlas", "plan", str(EXAMPLE), "--dry-run"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["credits"]["total"] == 800 * 30 + 800 * 10
    assert d["requests"][0]["body"]["definitions"][1]["target"] == "192.0.2.10"
    assert d["requests"][0]["headers"]["Authorization"] == "Key <redacted>"


def test_cli_bad_spec_is_one_line_exit_2(tmp_path):
    from dnscamp.cli import app

    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text().replace('server = "192.0.2.10"', 'server = "nope"'))
    r = CliRunner().invoke(app, ["atlas", "plan", str(bad)])
    assert r.exit_code == 2
    assert str(bad) in r.stderr and "server" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_example_spec_loads():
    s = load_spec(EXAMPLE)
    assert s.sources[0].count == 800 and s.ping.packets == 5


# -- backoff policy, with a fake clock -----------------------------------------------------------
def test_backoff_retries_429_and_5xx_only_and_caps():
    b = Backoff(base_s=1, factor=2, max_delay_s=8, max_attempts=5, jitter=False)
    assert [b.delay(a, 503) for a in range(1, 6)] == [1, 2, 4, 8, None]
    assert b.delay(1, 429) == 1 and b.delay(1, None) == 1
    assert b.delay(1, 400) is None and b.delay(1, 403) is None and b.delay(1, 404) is None
    assert b.delay(1, 429, retry_after=30) == 8  # Retry-After honoured, within the cap
    assert b.delay(1, 429, retry_after=5) == 5


def test_backoff_jitter_stays_in_range():
    b = Backoff(base_s=1, factor=2, max_delay_s=60, max_attempts=10)
    rng = random.Random(1)
    for a in range(1, 9):
        cap = min(60, 2 ** (a - 1))
        d = b.delay(a, 502, rng=rng)
        assert cap / 2 <= d <= cap


def test_call_with_retry_fake_clock():
    from atlas.client import AtlasApiError, call_with_retry

    class Resp:
        def __init__(self, code):
            self.status_code, self.headers = code, {"Retry-After": "3"} if code == 429 else {}

    class FakeReq:
        codes = [429, 502, 200]

        def get_http_method(self, method):
            return Resp(self.codes.pop(0))

    slept: list[float] = []
    reqs: list = []

    def make():
        r = FakeReq()
        reqs.append(r)
        return r

    def call(req):
        resp = req.get_http_method("GET")
        return resp.status_code == 200, ["ok"]

    out = call_with_retry(make, call, policy=Backoff(base_s=1, jitter=False), sleep=slept.append)
    assert out == ["ok"] and slept == [3.0, 2.0]
    FakeReq.codes = [404]
    with pytest.raises(AtlasApiError) as ei:
        call_with_retry(make, call, policy=Backoff(jitter=False), sleep=slept.append)
    assert ei.value.status == 404


# -- the API key ---------------------------------------------------------------------------------
SECRET = "0b1e5c1a-7f2d-4c3e-9a8b-1234567890ab"


def test_key_from_env_or_file_is_never_shown(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("RIPE_ATLAS_KEY", SECRET)
    k = keymod.load_key()
    assert k.reveal() == SECRET
    assert SECRET not in repr(k) and SECRET not in str(k) and SECRET not in f"{k}" and SECRET not in f"{k!r}"
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("dnscamp.atlas").warning("using %s", k)
    assert SECRET not in caplog.text
    monkeypatch.delenv("RIPE_ATLAS_KEY")
    f = tmp_path / "key"
    f.write_text(SECRET + "\n")
    f.chmod(0o600)
    assert keymod.load_key(f).reveal() == SECRET
    assert keymod.redact(f"header Authorization: Key {SECRET}", k) == "header Authorization: Key <redacted>"


def test_missing_or_bad_key(monkeypatch, tmp_path):
    monkeypatch.delenv("RIPE_ATLAS_KEY", raising=False)
    monkeypatch.delenv("RIPE_ATLAS_KEY_FILE", raising=False)
    with pytest.raises(keymod.KeyError_, match="RIPE_ATLAS_KEY"):
        keymod.load_key()
    assert keymod.load_key(required=False) is None
    monkeypatch.setenv("RIPE_ATLAS_KEY", "has spaces and ; " + SECRET)
    with pytest.raises(keymod.KeyError_) as ei:
        keymod.load_key()
    assert SECRET not in str(ei.value)


def test_submit_without_key_exits_2_and_spends_nothing(monkeypatch):
    from dnscamp.cli import app

    monkeypatch.delenv("RIPE_ATLAS_KEY", raising=False)
    monkeypatch.delenv("RIPE_ATLAS_KEY_FILE", raising=False)
    r = CliRunner().invoke(app, ["atlas", "submit", str(EXAMPLE), "--yes"])
    assert r.exit_code == 2 and "RIPE_ATLAS_KEY" in r.stderr
