"""Profiles: the data file, shorthand/explicit parsing, campaign additions, link configs."""

from __future__ import annotations

import pytest

from testbed.profiles import Profile, ProfileError, load_profiles, parse_profile, select

pytestmark = pytest.mark.unit

# (rtt ms, down Mbit/s, up Mbit/s): Kosek et al., TNSM 2024, Table II
KOSEK = {"fiber": (14.8, 99.9, 109.1), "cable": (25.2, 165.1, 11.6), "dsl": (42.4, 10.7, 0.8),
         "4g": (91.9, 54.0, 21.2), "4g-medium": (104.5, 28.7, 4.2)}


def test_builtin_profiles_present_with_sources():
    ps = load_profiles()
    assert set(ps) == {"none", *KOSEK, "4g-www", "lossy-4g", "3g"}
    for p in ps.values():
        assert p.source.strip()
    for name in KOSEK:
        assert "000_6647a8606a2226e0" in ps[name].source and "Table II" in ps[name].source
    for name in ("4g-www", "lossy-4g", "3g"):
        assert "002_6fa4cf280535d36b" in ps[name].source and "3.2.4" in ps[name].source


@pytest.mark.parametrize("name", sorted(KOSEK))
def test_kosek_rtt_split_half_per_direction(name):
    rtt, down, up = KOSEK[name]
    p = load_profiles()[name]
    assert p.up.delay_ms == pytest.approx(rtt / 2) and p.down.delay_ms == pytest.approx(rtt / 2)
    assert p.rtt_ms == pytest.approx(rtt)
    assert p.down.rate_mbps == down and p.up.rate_mbps == up
    assert p.up.loss_p == 0 and p.down.loss_p == 0


def test_www20_profiles_shape_the_uplink_only():
    ps = load_profiles()
    w = ps["4g-www"]
    assert (w.up.delay_ms, w.up.jitter_ms, w.up.loss_p, w.up.rate_mbps) == (53.3, 1.0, 0.005, 7.44)
    assert (w.down.delay_ms, w.down.jitter_ms, w.down.loss_p, w.down.rate_mbps) == (0.0, 0.0, 0.0, 22.1)
    assert w.rtt_ms == pytest.approx(53.3)
    assert ps["lossy-4g"].up.loss_p == 0.015 and ps["lossy-4g"].up.delay_ms == 53.3
    g3 = ps["3g"]
    assert (g3.up.delay_ms, g3.up.jitter_ms, g3.up.loss_p, g3.up.rate_mbps, g3.down.rate_mbps) == (150.0, 8.0, 0.021, 1.0, 1.0)


def test_none_profile_is_null_and_others_are_not():
    ps = load_profiles()
    assert ps["none"].is_null
    assert not any(p.is_null for n, p in ps.items() if n != "none")
    up, down = ps["none"].link_config()
    assert up["delay_ms"] == 0 and "rate_mbps" not in up and up["loss"] == {"model": "none"}


def test_link_config_matches_the_linkem_driver_keys():
    from testbed.linkem.driver import normalize_direction

    for p in load_profiles().values():
        for d in p.link_config():
            norm = normalize_direction(d)  # raises on an unknown key
            assert norm["delay_ms"] == d["delay_ms"]


def test_rate_queue_default_is_one_rtt_at_least_50ms():
    ps = load_profiles()
    assert ps["fiber"].link_config()[0]["queue_limit_ms"] == 50.0
    assert ps["4g-medium"].link_config()[1]["queue_limit_ms"] == pytest.approx(104.5)


def test_seeds_differ_per_direction_and_are_stable():
    a = load_profiles()["3g"].link_config()
    b = load_profiles()["3g"].link_config()
    assert a == b and a[0]["seed"] != a[1]["seed"]


def test_campaign_can_add_and_override():
    ps = load_profiles({"sat": {"source": "my notes", "rtt_ms": 600, "down_mbps": 50, "up_mbps": 5, "loss": 0.01},
                        "fiber": {"source": "override", "rtt_ms": 10}})
    assert ps["sat"].up.delay_ms == 300 and ps["sat"].up.loss_p == 0.01 and ps["sat"].down.loss_p == 0.01
    assert ps["fiber"].rtt_ms == 10 and ps["fiber"].up.rate_mbps is None


def test_explicit_gilbert_elliott_profile():
    p = parse_profile("bursty", {"source": "x", "up": {"loss": {"model": "gilbert_elliott", "p": 0.01, "r": 0.5,
                                                               "k": 1.0, "h": 0.0}}})
    # stationary bad-state share p/(p+r); all lost in bad, none in good
    assert p.up.loss_p == pytest.approx(0.01 / 0.51)
    assert p.up.linkem_config(1, 50)["loss"]["model"] == "gilbert_elliott"


@pytest.mark.parametrize("name,table,needle", [
    ("Bad_Name", {"source": "x"}, "name must match"),
    ("x", {"source": "x", "rtt_ms": -1}, "rtt_ms"),
    ("x", {"source": "x", "rtt_ms": 10, "up": {}}, "not both"),
    ("x", {"source": "x", "up": {"delay_ms": 1, "bogus": 2}}, "up.bogus"),
    ("x", {"source": "x", "up": {"loss": {"model": "random", "p": 1.5}}}, "up.loss"),
    ("x", {"rtt_ms": 5}, "source"),
    ("x", {"source": "x", "down": {"rate_mbps": 0}}, "down.rate_mbps"),
])
def test_bad_profiles_name_the_field(name, table, needle):
    with pytest.raises(ProfileError) as ei:
        parse_profile(name, table)
    assert needle in str(ei.value)


def test_select_order_dedup_and_unknown():
    ps = load_profiles()
    assert [p.name for p in select(["4g", "fiber", "4g"], ps)] == ["4g", "fiber"]
    with pytest.raises(ProfileError, match="unknown profile 'nope'"):
        select(["nope"], ps)
    with pytest.raises(ProfileError):
        select([], ps)


def test_profile_model_roundtrip():
    p = load_profiles()["lossy-4g"]
    assert Profile.model_validate(p.model_dump(mode="json")) == p


def test_profiles_translate_to_netem_commands():
    """The netem backend's commands for every profile (unit-tested even where the kernel has no
    sch_netem): delay per direction, uplink-only loss for the WWW'20 profiles, rate + framing."""
    from testbed.linkem.driver import netem_argv

    ps = load_profiles()
    up, down = ps["fiber"].link_config()
    a = netem_argv("to-isp", up)
    assert a[:7] == ["tc", "qdisc", "replace", "dev", "to-isp", "root", "netem"]
    assert a[a.index("delay") + 1] == "7400us" and a[a.index("rate") + 1] == "109100kbit"
    up, down = ps["3g"].link_config()
    a, b = netem_argv("to-isp", up), netem_argv("to-c", down)
    assert a[a.index("delay") + 1:a.index("delay") + 3] == ["150000us", "8000us"]
    assert a[a.index("loss") + 1:a.index("loss") + 3] == ["random", "2.1%"]
    assert "loss" not in b and "delay" not in b and b[b.index("rate") + 1] == "1000kbit"
    up, down = ps["none"].link_config()
    assert netem_argv("to-isp", up)[7:] == ["limit", "1000"]
