"""Dashboard 4, QuicSocks savings (paper 001, Table I and §IV-B): per probe, how much a proxy next
to the probe's resolver would save on connection setup (RTT_direct - RTT_Server), the share of
probes saving at least 10 and 30 ms, a map of the probes' savings (v_atlas_probes), and the Table I
terms per probe. Probes behind a resolver in their own AS (isp_resolver), as the paper analyses
them; the latest successful pings of the selected RIPE Atlas campaign (v_quicsocks_savings has no time axis: the time range does not apply)."""

from __future__ import annotations

from dashboards.panels import geomap_panel, histogram_panel, new_dashboard, stat_panel, table_panel, where, xy_panel

UID = "dnscamp-quicsocks"
VARS = ("atlas_campaign",)
W = where(*VARS, time=None) + "\n  AND isp_resolver AND saving_ms IS NOT NULL"
THRESHOLDS_MS = (10, 30)


def dashboard():
    dist = f"""
SELECT saving_ms, saving_retry_ms
FROM v_quicsocks_savings
{W}"""
    shares = ",\n       ".join(
        f"avg((saving_ms >= {t})::int) AS share_{t}ms,\n       avg((saving_retry_ms >= {t})::int) AS share_{t}ms_retry"
        for t in THRESHOLDS_MS)
    share = f"""
SELECT count(*) AS probes,
       {shares}
FROM v_quicsocks_savings
{W}"""
    cdf = f"""
SELECT s.series, s.saving_ms, cume_dist() OVER (PARTITION BY s.series ORDER BY s.saving_ms) AS cdf
FROM (SELECT * FROM v_quicsocks_savings
{W}) v
CROSS JOIN LATERAL (VALUES ('without retry', v.saving_ms), ('with retry', v.saving_retry_ms)) AS s(series, saving_ms)
ORDER BY 1, 2"""
    terms = f"""
SELECT prb_id, probe_asn, resolver, resolver_asn, rtt_dns_ms, rtt_server_ms, rtt_direct_ms,
       status_quo_ms, proposal_ms, saving_ms, status_quo_retry_ms, proposal_retry_ms, saving_retry_ms
FROM v_quicsocks_savings
{W}
ORDER BY saving_ms DESC, prb_id"""
    # v_atlas_probes: where each probe of the campaign stands (the Atlas probe API, or a testbed
    # probe's documented site); probes without a location are left off the map, not put at 0, 0
    geo = f"""
SELECT s.prb_id, p.country_code, p.asn_v4, p.lat, p.lon, s.saving_ms, s.saving_retry_ms, s.rtt_dns_ms
FROM (SELECT * FROM v_quicsocks_savings
{W}) s
JOIN v_atlas_probes p ON p.campaign = s.campaign AND p.prb_id = s.prb_id
WHERE p.lat IS NOT NULL AND p.lon IS NOT NULL
ORDER BY s.prb_id"""
    share_cols = {"probes": ("probes", "none")} | {
        f"share_{t}ms{r}": (f"≥ {t} ms{' (retry)' if r else ''}", "percentunit") for t in THRESHOLDS_MS for r in ("", "_retry")}
    rows = [
        ("Savings", [
            stat_panel("Probes saving at least 10 / 30 ms", """
Question: for what share of probes would QuicSocks save at least 10 or 30 ms on a connection's
setup, without and with a retry (two round trips)? Shares of the probes analysed.""", share, share_cols, w=24),
            histogram_panel("Per-probe savings distribution", """
Question: how are the savings spread over probes? saving_ms = RTT_direct - RTT_Server per probe;
saving_retry_ms = twice that (a retried handshake).""", dist,
                            {"saving_ms": ("saving", "ms"), "saving_retry_ms": ("saving with retry", "ms")}),
            xy_panel("CDF of per-probe savings", """
Question: what share of probes save at most x ms (negative: the proxy would be slower)? cume_dist()
over the probes' savings.""", cdf, {"saving_ms": ("saving", "ms"), "cdf": ("share of probes", "percentunit")}, series_by="series"),
        ]),
        ("Table I per probe", [
            table_panel("Table I terms per probe", """
Question: where does each probe's saving come from? RTT_DNS (probe -> its resolver), RTT_Server
(server -> that resolver), RTT_direct (probe -> server), status quo = RTT_DNS + RTT_direct, proposal =
RTT_DNS + RTT_Server, and the same with a retry.""", terms, {
                "prb_id": ("probe", "none"), "probe_asn": ("probe AS", "none"), "resolver": ("resolver", None),
                "resolver_asn": ("resolver AS", "none"), "rtt_dns_ms": ("RTT_DNS", "ms"), "rtt_server_ms": ("RTT_Server", "ms"),
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
    return new_dashboard(UID, "QuicSocks savings", __doc__.split("\n\n")[0], VARS, rows)
