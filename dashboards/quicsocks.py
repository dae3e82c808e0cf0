"""Dashboard 4, QuicSocks savings (paper 001, Table I and §IV-B): per probe, how much a proxy next
to the probe's resolver would save on connection setup (RTT_direct - RTT_Server), the share of
probes saving at least 10 and 30 ms, a map of the probes' savings (v_atlas_probes), and the Table I
terms per probe. Probes behind a resolver in their own AS (isp_resolver), as the paper analyses
them; the latest successful pings of one RIPE Atlas campaign, the latest by default
(v_quicsocks_savings has no time axis: the time range does not apply). n probes on every panel,
the median saving with its order-statistic 95 % interval and the shares with Wilson intervals."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.models.dashboard import VariableRefresh, VariableSort

from dashboards.panels import (DATASOURCE, geomap_panel, histogram_panel, new_dashboard, table_panel, where,
                               xy_panel)

UID = "dnscamp-quicsocks"
VARS = ("atlas_campaign",)
W = where(*VARS, time=None) + "\n  AND isp_resolver AND saving_ms IS NOT NULL"
THRESHOLDS_MS = (10, 30)
# The columns of v_quicsocks_savings the dashboards' role reads (migration 0029: not the probe's
# or the resolver's address); named, since `SELECT *` would name those too and be refused.
COLUMNS = ("campaign, prb_id, probe_asn, resolver_asn, rtt_dns_ms, rtt_server_ms, rtt_direct_ms, status_quo_ms, "
           "proposal_ms, status_quo_retry_ms, proposal_retry_ms, saving_ms, saving_retry_ms")
# One Atlas campaign at a time (pooling campaigns would pool different probes, servers and
# dates): the campaigns the QuicSocks view has, the one with the latest Atlas result first, which
# Grafana selects when the dashboard opens (no saved selection, no "All").
CAMPAIGNS = """
SELECT s.campaign
FROM (SELECT DISTINCT campaign FROM v_quicsocks_savings) s
LEFT JOIN (SELECT campaign, max(last_result) AS last_result FROM v_atlas_credits GROUP BY 1) c ON c.campaign = s.campaign
ORDER BY c.last_result DESC NULLS LAST, s.campaign DESC"""


def campaign_variable() -> dash.QueryVariable:
    return (dash.QueryVariable("atlas_campaign").label("Atlas campaign")
            .description("One RIPE Atlas campaign (the testbed's are <campaign>/<run>); the latest first.")
            .query(CAMPAIGNS.strip()).datasource(DATASOURCE).multi(False).include_all(False)
            .refresh(VariableRefresh.ON_DASHBOARD_LOAD).sort(VariableSort.DISABLED))


def dashboard():
    dist = f"""
SELECT saving_ms, saving_retry_ms
FROM v_quicsocks_savings
{W}"""
    # per series (without / with a retry): n probes, the median saving with its
    # distribution-free 95 % interval (order statistics, the store's dnscamp_median_ci_q_lo/_hi:
    # none below 6 probes), the shares saving at least 10 and 30 ms with their Wilson intervals
    shares = ",\n       ".join(
        f"count(*) FILTER (WHERE saving >= {t}) AS saving_{t}ms,\n"
        f"       (count(*) FILTER (WHERE saving >= {t}))::float8 / n AS share_{t}ms,\n"
        f"       dnscamp_wilson_lo(count(*) FILTER (WHERE saving >= {t}), n) AS share_{t}ms_lo,\n"
        f"       dnscamp_wilson_hi(count(*) FILTER (WHERE saving >= {t}), n) AS share_{t}ms_hi"
        for t in THRESHOLDS_MS)
    share = f"""
SELECT series, n AS probes,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY saving) AS median_ms,
       percentile_disc(dnscamp_median_ci_q_lo(n)) WITHIN GROUP (ORDER BY saving) AS median_lo_ms,
       percentile_disc(dnscamp_median_ci_q_hi(n)) WITHIN GROUP (ORDER BY saving) AS median_hi_ms,
       {shares}
FROM (SELECT s.series, s.saving, count(*) OVER (PARTITION BY s.series) AS n
      FROM (SELECT saving_ms, saving_retry_ms FROM v_quicsocks_savings
{W}) v
      CROSS JOIN LATERAL (VALUES ('without retry', v.saving_ms), ('with retry', v.saving_retry_ms)) AS s(series, saving)) x
GROUP BY series, n
ORDER BY series DESC"""
    cdf = f"""
SELECT s.series || ' (n = ' || count(*) OVER (PARTITION BY s.series) || ')' AS series, s.saving_ms,
       cume_dist() OVER (PARTITION BY s.series ORDER BY s.saving_ms) AS cdf
FROM (SELECT saving_ms, saving_retry_ms FROM v_quicsocks_savings
{W}) v
CROSS JOIN LATERAL (VALUES ('without retry', v.saving_ms), ('with retry', v.saving_retry_ms)) AS s(series, saving_ms)
ORDER BY 1, 2"""
    terms = f"""
SELECT prb_id, probe_asn, resolver_asn, rtt_dns_ms, rtt_server_ms, rtt_direct_ms,
       status_quo_ms, proposal_ms, saving_ms, status_quo_retry_ms, proposal_retry_ms, saving_retry_ms
FROM v_quicsocks_savings
{W}
ORDER BY saving_ms DESC, prb_id"""
    # v_atlas_probes: where each probe of the campaign stands (the Atlas probe API, or a testbed
    # probe's documented site); probes without a location are left off the map, not put at 0, 0
    geo = f"""
SELECT s.prb_id, p.country_code, p.asn_v4, p.lat, p.lon, s.saving_ms, s.saving_retry_ms, s.rtt_dns_ms
FROM (SELECT {COLUMNS} FROM v_quicsocks_savings
{W}) s
JOIN v_atlas_probes p ON p.campaign = s.campaign AND p.prb_id = s.prb_id
WHERE p.lat IS NOT NULL AND p.lon IS NOT NULL
ORDER BY s.prb_id"""
    share_cols = {"series": ("saving", None), "probes": ("probes (n)", "none"), "median_ms": ("median", "ms"),
                  "median_lo_ms": ("median 95 % CI low", "ms"), "median_hi_ms": ("median 95 % CI high", "ms")}
    for t in THRESHOLDS_MS:
        share_cols |= {f"saving_{t}ms": (f"probes ≥ {t} ms", "none"), f"share_{t}ms": (f"share ≥ {t} ms", "percentunit"),
                       f"share_{t}ms_lo": (f"share ≥ {t} ms, 95 % CI low", "percentunit"),
                       f"share_{t}ms_hi": (f"share ≥ {t} ms, 95 % CI high", "percentunit")}
    rows = [
        ("Savings", [
            table_panel("Median saving and probes saving at least 10 / 30 ms", """
Question: how much would QuicSocks save on a connection's setup for a typical probe, and for what
share of probes at least 10 or 30 ms, without and with a retry (two round trips)? Per series: n
probes, the median saving with its distribution-free 95 % interval (order statistics of the
probes' savings: none below 6 probes), the probes saving at least 10 and 30 ms and their share
with its Wilson 95 % interval. One Atlas campaign (the variable; the latest by default).""",
                        share, share_cols, h=6),
            histogram_panel("Per-probe savings distribution", """
Question: how are the savings spread over probes? saving_ms = RTT_direct - RTT_Server per probe;
saving_retry_ms = twice that (a retried handshake).""", dist,
                            {"saving_ms": ("saving", "ms"), "saving_retry_ms": ("saving with retry", "ms")}),
            xy_panel("CDF of per-probe savings", """
Question: what share of probes save at most x ms (negative: the proxy would be slower)? cume_dist()
over the probes' savings; the legend gives each curve's n probes.""", cdf, {"saving_ms": ("saving", "ms"), "cdf": ("share of probes", "percentunit")}, series_by="series"),
        ]),
        ("Table I per probe", [
            table_panel("Table I terms per probe", """
Question: where does each probe's saving come from? RTT_DNS (probe -> its resolver), RTT_Server
(server -> that resolver), RTT_direct (probe -> server), status quo = RTT_DNS + RTT_direct, proposal =
RTT_DNS + RTT_Server, and the same with a retry. One row per probe (each RTT the mean of its latest
successful ping); the resolver by its AS, not its address.""", terms, {
                "prb_id": ("probe", "none"), "probe_asn": ("probe AS", "none"), "resolver_asn": ("resolver AS", "none"), "rtt_dns_ms": ("RTT_DNS", "ms"), "rtt_server_ms": ("RTT_Server", "ms"),
                "rtt_direct_ms": ("RTT_direct", "ms"), "status_quo_ms": ("status quo", "ms"), "proposal_ms": ("proposal", "ms"),
                "saving_ms": ("saving", "ms"), "status_quo_retry_ms": ("status quo (retry)", "ms"),
                "proposal_retry_ms": ("proposal (retry)", "ms"), "saving_retry_ms": ("saving (retry)", "ms")}),
        ]),
        # last: panel ids are positional and public links refer to them
        ("Where the probes are", [
            geomap_panel("Savings per probe on the map", """
Question: where are the probes that would save the most, and does the saving follow geography
(distance to the resolver's site)? One marker per probe at its Atlas location (v_atlas_probes),
sized and coloured by saving_ms; the tooltip gives the probe's country, AS and Table I terms.""", geo, {
                "prb_id": ("probe", "none"), "country_code": ("country", None), "asn_v4": ("probe AS", "none"),
                "lat": ("latitude", "none"), "lon": ("longitude", "none"), "saving_ms": ("saving", "ms"),
                "saving_retry_ms": ("saving with retry", "ms"), "rtt_dns_ms": ("RTT_DNS", "ms")}, value="saving_ms"),
        ]),
    ]
    # its own campaign variable (single-valued, the latest first) in place of the shared one
    return new_dashboard(UID, "QuicSocks savings", __doc__.split("\n\n")[0], (), rows).with_variable(campaign_variable())
