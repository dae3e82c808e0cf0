"""What every dnscamp dashboard is made of: the Postgres datasource (the dnscamp_grafana role),
our SQL dataquery (the SDK has no Postgres/SQL dataquery type), the template variables and their
SQL filters, and one panel helper per visualisation kind. Panels read views (v_*) only.

A panel names the columns it reads in its field config, so that tests can check them against
what its SQL returns: tables, bars, histograms, stats and XY charts carry one ``byName`` override
per column (its header and unit), XY charts also the partitioning column; a time-series query
returns ``time``, ``metric`` (the series name) and one value column, a heatmap ``time`` and one
count column per bucket."""

from __future__ import annotations

from typing import Any, Literal

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import barchart, dashboard, geomap, heatmap, histogram, stat, table, timeseries, xychart
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import geomap as geomap_model
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DashboardLinkType,
    DataSourceRef,
    DataTransformerConfig,
    DynamicConfigValue,
    FieldColorModeId,
    VariableOption,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.xychart import SeriesMapping, XYShowMode

# The provisioned datasource (provisioning/datasources/postgres.yaml): Grafana 11's plugin id.
DATASOURCE = DataSourceRef(type_val="grafana-postgresql-datasource", uid="dnscamp-postgres")
Format = Literal["table", "time_series"]


class SqlQuery(cogvariants.Dataquery):
    """A Postgres datasource target: raw SQL in code mode."""

    def __init__(self, ref_id: str, raw_sql: str, fmt: Format) -> None:
        self.ref_id, self.raw_sql, self.format = ref_id, raw_sql, fmt

    def to_json(self) -> dict[str, object]:
        return {"refId": self.ref_id, "datasource": DATASOURCE.to_json(), "editorMode": "code",
                "format": self.format, "rawQuery": True, "rawSql": self.raw_sql}


class Sql(cogbuilder.Builder[SqlQuery]):
    def __init__(self, raw_sql: str, fmt: Format = "table", ref_id: str = "A") -> None:
        self._q = SqlQuery(ref_id, raw_sql.strip(), fmt)

    def build(self) -> SqlQuery:
        return self._q


# --- variables ---------------------------------------------------------------------------------
# Each is multi-valued with "All" (= every option, no custom all value), so a panel's SQL reads
# `col = ANY(ARRAY[${var:sqlstring}]::text[])`: each value single-quoted with quotes doubled.
# Not `IN (...)`: a variable with no options (nothing in the time range) expands to nothing,
# and `IN ()` is a syntax error where an empty array just matches no row. NULLs are shown as
# 'none' (they would match nothing), on both sides.


def _var(name: str, label: str, sql: str, description: str) -> dashboard.QueryVariable:
    return (dashboard.QueryVariable(name).label(label).description(description).query(sql.strip())
            .datasource(DATASOURCE).multi(True).include_all(True).refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(VariableSort.ALPHABETICAL_ASC).current(VariableOption(selected=True, text=["All"], value=["$__all"])))


def _distinct(expr: str, view: str, where: str) -> str:
    return f"SELECT DISTINCT {expr} FROM {view} WHERE {where} ORDER BY 1"


CAMPAIGN = "campaign = ANY(ARRAY[${campaign:sqlstring}]::text[])"
# A daily rollup row counts whole when the range touches its UTC day: the days starting in the
# range and the one it starts in (a range of a few hours reads the day it lies in).
DAYS = "($__timeFilter(day) OR day = date_trunc('day', $__timeFrom()::timestamptz, 'UTC'))"


def _or_none(col: str, var: str) -> str:
    """``col`` is one of the values of ``var``, a NULL counting as 'none'. Written without
    coalesce(col, 'none'): the planner has statistics for the column, none for that expression,
    and guessed 5 of 10,000 contexts for two such conditions, then joined the records to them in
    a nested loop (20 s for a panel of 23,000 page loads instead of 0.3 s)."""
    arr = f"ARRAY[${{{var}:sqlstring}}]::text[]"
    return f"({col} = ANY({arr}) OR {col} IS NULL AND 'none' = ANY({arr}))"


REGION = _or_none("region", "region")


# Where the selected campaigns measured DNS queries or page loads in the range: v_contexts, one
# row per campaign x kind x vantage x region x profile (from the contexts and the ingest rollup,
# never the records), those whose first to last record meets the UTC days the range touches
# (as the daily rollups count them: panels.DAYS).
CONTEXTS = ("v_contexts WHERE kind IN ('dns_query', 'page_load')"
            " AND last_started >= date_trunc('day', $__timeFrom()::timestamptz, 'UTC') AND first_started <= $__timeTo()")
# the vantages of the selected regions, for the rollups (they have vantages, not regions)
REGION_VANTAGES = f"vantage_id IN (SELECT vantage_id FROM {CONTEXTS} AND {CAMPAIGN} AND {REGION})"
VARIABLES: dict[str, tuple[str, str, str]] = {
    # name: (label, SQL, what it selects)
    "campaign": ("Campaign", f"SELECT DISTINCT campaign FROM {CONTEXTS} ORDER BY 1",
                 "Campaigns with DNS queries or page loads on the days of the time range."),
    "region": ("Region", f"SELECT DISTINCT coalesce(region, 'none') FROM {CONTEXTS} AND {CAMPAIGN} ORDER BY 1",
               "Vantage regions ('none' when a record has none)."),
    # chained to the region: the rollups (v_dns_hourly*) have vantages, not regions, so panels
    # over them filter regions through the vantages of the selected regions
    "vantage": ("Vantage", f"SELECT DISTINCT vantage_id FROM {CONTEXTS} AND {CAMPAIGN} AND {REGION} ORDER BY 1",
                "Vantage points of the selected campaigns and regions."),
    "profile": ("Network profile", f"SELECT DISTINCT coalesce(network_profile, 'none') FROM {CONTEXTS} AND {CAMPAIGN} ORDER BY 1",
                "Emulated or real access-network profiles ('none' when a record has none)."),
    # from the daily rollups (one row per day and group, not per record): every UTC day the range touches
    "resolver": ("Resolver", _distinct("coalesce(resolver, 'none')", "v_dns_conn_daily", f"{DAYS} AND {CAMPAIGN}"),
                 "Resolvers queried by the DNS measurements."),
    "transport": ("Transport", _distinct("transport", "v_dns_conn_daily", f"{DAYS} AND {CAMPAIGN}"),
                  "DNS transports (do53, dot, doh, doh3, doq)."),
    "browser": ("Browser", _distinct("browser", "v_page_load_daily", f"{DAYS} AND {CAMPAIGN}"),
                "Browsers of the page loads."),
    "dns_mode": ("DNS mode", _distinct("dns_mode", "v_page_load_daily", f"{DAYS} AND {CAMPAIGN}"),
                 "How the browser resolved names (e.g. do53:isp, doh:isp, system)."),
    # the campaigns of the QuicSocks view (its discovery) and of the probes' metadata: both a few
    # hundred rows
    "atlas_campaign": ("Atlas campaign", "SELECT campaign FROM v_quicsocks_savings UNION SELECT campaign FROM v_atlas_probes "
                       "ORDER BY 1", "RIPE Atlas campaigns (the testbed's are <campaign>/<run>)."),
}
# the SQL condition each variable stands for, on the columns of the views that have them
FILTERS = {
    "campaign": CAMPAIGN,
    "vantage": "vantage_id = ANY(ARRAY[${vantage:sqlstring}]::text[])",
    # the rollups have vantages, not regions: a region is the vantages v_contexts places in it
    "region": REGION_VANTAGES,
    "profile": _or_none("network_profile", "profile"),
    "resolver": _or_none("resolver", "resolver"),
    "transport": "transport = ANY(ARRAY[${transport:sqlstring}]::text[])",
    "browser": "browser = ANY(ARRAY[${browser:sqlstring}]::text[])",
    "dns_mode": "dns_mode = ANY(ARRAY[${dns_mode:sqlstring}]::text[])",
    "atlas_campaign": "campaign = ANY(ARRAY[${atlas_campaign:sqlstring}]::text[])",
}


def variables(*names: str) -> list[dashboard.QueryVariable]:
    return [_var(n, *VARIABLES[n]) for n in names]


def where(*names: str, time: str | None = "started_at") -> str:
    """The WHERE clause for the dashboard's variables ``names`` (and its time range on ``time``;
    ``time="day"``: the daily rollups' day column, every UTC day the range touches)."""
    conds = ([DAYS if time == "day" else f"$__timeFilter({time})"] if time else []) + [FILTERS[n] for n in names]
    return "WHERE " + "\n  AND ".join(conds)



# --- shared SQL: reading the rollups' histograms ------------------------------------------------
# The rollups (docs/store.md "Rollups") keep a histogram per row: bucket 0 holds values below
# 0.001, bucket b >= 1 the values in [0.001 * 1.02^(b-1), 0.001 * 1.02^b) (ms, RTT multiples or
# bytes), dnscamp_hist_value(b) its geometric middle. The panels sum the (bucket, n) rows they
# select per group and bucket first, then read what they show from those sums.
BIN = 12  # buckets per bin of the histogram panels: 1.02^12 = 1.27 x wide


def hist_quantiles(sums: str, keys: str, qs: dict[str, float], *, median: str | None = None, with_n: bool = False) -> str:
    """Percentiles per group (``keys``, columns of ``sums``: a query of (keys, bucket, n)
    histogram sums, one row per group and bucket) in one pass: the first bucket whose running
    count reaches ceil(q * total) (nearest rank, as percentile_disc and dnscamp_hist_quantile), at
    its middle value: within 1 % of percentile_disc over the records. One sort of the sums and
    no function call per group (one dnscamp_hist_quantile call per group was 2.3 times slower
    than the exact percentiles over the records). The sums are MATERIALIZED: planned on their
    own, they are a hash aggregate; inlined, the planner sorted every histogram row for the
    window's order instead (on disk: 1.5 s instead of 0.2 s for the detail table at 1 M).

    With ``median`` (the name of a 0.5 in ``qs``) or ``with_n``, per group also ``hist_n`` (its
    count); with ``median``, ``<median>_lo`` and ``<median>_hi``: the median's distribution-free 95 % interval,
    the histogram's order statistics of ranks dnscamp_median_ci_rank(n) and n + 1 - that, read by
    dnscamp_hist_rank (migration 0028; docs/sql.md "Intervals"), NULL below 6 values. One rank
    computation per group (the function loops over the binomial pmf: per histogram row it
    would run once per bucket)."""
    picks = ",\n         ".join(
        f"dnscamp_hist_value(min(bucket) FILTER (WHERE cum >= greatest(ceil({q} * total), 1))) AS {name}"
        for name, q in qs.items())
    names = ", ".join(qs)
    ci = lateral = ""
    if median is not None:
        lateral = "\n  CROSS JOIN LATERAL (SELECT dnscamp_median_ci_rank(g.hist_n) AS j) r"
        if qs.get(median) != 0.5:
            raise ValueError(f"hist_quantiles: {median!r} is not the median (0.5) of {qs}")
        ci = (f",\n         dnscamp_hist_rank(g.bs, g.ns, r.j) AS {median}_lo,"
              f"\n         dnscamp_hist_rank(g.bs, g.ns, g.hist_n + 1 - r.j) AS {median}_hi")
    return f"""
  WITH b AS MATERIALIZED (
              {sums}
  )
  SELECT {keys}, {names}{", g.hist_n" if median or with_n else ""}{ci}
  FROM (SELECT {keys},
         {picks},
         max(total)::bigint AS hist_n{", array_agg(bucket) AS bs, array_agg(n) AS ns" if median else ""}
        FROM (SELECT {keys}, bucket, n, sum(n) OVER (PARTITION BY {keys} ORDER BY bucket) AS cum,
                     sum(n) OVER (PARTITION BY {keys}) AS total
              FROM b) c
        GROUP BY {keys}) g{lateral}"""



# the columns median_table shows in the tooltip only
MEDIAN_TABLE_TIPS = ("p50_lo_ms", "p50_hi_ms", "p90_ms", "p99_ms", "n")


def median_table(sums: str, key: str, key_title: str, n_title: str) -> tuple[str, dict[str, tuple[str, str | None]]]:
    """Per ``key`` (a column of ``sums``, (key, bucket, n) histogram sums): the median with its
    95 % interval, p90, p99 and n, as SQL and the table's columns (the interval, the tails and n
    are MEDIAN_TABLE_TIPS, shown in the tooltip). The per-region and per-vantage rows' table."""
    sql = f"""
SELECT {key}, p50 AS p50_ms, p50_lo AS p50_lo_ms, p50_hi AS p50_hi_ms, p90 AS p90_ms, p99 AS p99_ms, hist_n AS n
FROM ({hist_quantiles(sums, key, {"p50": 0.5, "p90": 0.9, "p99": 0.99}, median="p50")}
) q
ORDER BY 1"""
    columns = {key: (key_title, None), "p50_ms": ("median", "ms"), "p50_lo_ms": ("median 95 % CI low", "ms"),
               "p50_hi_ms": ("median 95 % CI high", "ms"), "p90_ms": ("p90", "ms"), "p99_ms": ("p99", "ms"),
               "n": (n_title, "none")}
    return sql, columns

def hist_cdf(series: str, value: str, source: str, where_sql: str) -> str:
    """A CDF per ``series`` (an SQL expression over ``source``, a histogram view) at the upper
    edge of each non-empty bucket: the share of the series' values below that edge, which is
    exact there (every value of a bucket lies below its upper edge): one point per 2 % of
    ``value``. Columns: series (its name and n: "<series> (n=<values>)", the legend's), ``value``
    (the edge), cdf. Grafana has no CDF panel: an XY chart draws it."""
    return f"""
SELECT series || ' (n=' || sum(n) OVER (PARTITION BY series) || ')' AS series,
       CASE WHEN bucket > 0 THEN 0.001 * power(1.02::float8, bucket) ELSE 0.001 END AS {value},
       sum(n) OVER (PARTITION BY series ORDER BY bucket)::float8 / sum(n) OVER (PARTITION BY series) AS cdf
FROM (SELECT {series} AS series, bucket, sum(n) AS n
      FROM {source}
      {where_sql}
      GROUP BY 1, 2) b
ORDER BY 1, 2"""


def hist_bins(columns: dict[str, str], source: str, where_sql: str) -> str:
    """Pre-bucketed counts for Grafana's histogram panel (fields ``xMin``, ``xMax`` and one count
    per column: it draws them as they are, computing nothing from raw rows): BIN rollup buckets
    per bin (1.27 x wide on a log scale from 0.001, the rollup's own edges; bucket 0 is the bin
    from 0). ``columns``: count column -> the condition a histogram row meets to count."""
    counts = ",\n       ".join(f'coalesce(sum(n) FILTER (WHERE {cond}), 0) AS "{name}"' for name, cond in columns.items())
    return f"""
SELECT CASE WHEN bin < 0 THEN 0 ELSE 0.001 * power(1.02::float8, bin * {BIN}) END AS "xMin",
       0.001 * power(1.02::float8, (bin + 1) * {BIN}) AS "xMax",
       {counts}
FROM (SELECT *, CASE WHEN bucket = 0 THEN -1 ELSE (bucket - 1) / {BIN} END AS bin
      FROM {source}
      {where_sql}
      ) h
GROUP BY bin
ORDER BY bin"""


# --- panels ------------------------------------------------------------------------------------
Columns = dict[str, tuple[str, str | None]]  # column -> (header, unit or None)


def _legend(b: Any, calcs: list[str] | None = None) -> Any:
    return b.legend(cb.VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.LIST)
                    .placement(common.LegendPlacement.BOTTOM).calcs(calcs or []))


def _tooltip(b: Any) -> Any:
    return b.tooltip(cb.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.NONE))


# Minimum interval of a panel over a rollup ($__interval never finer than the rollup's rows:
# a 1-minute bucket of an hourly rollup would plot the hour at an off-hour time)
HOURLY, DAILY = "1h", "1d"
# how a tooltip-only column is hidden: not drawn, not in the legend, in the tooltip (n and
# interval bounds beside the bar or point they belong to)
TOOLTIP_ONLY = {"viz": True, "legend": True, "tooltip": False}
LOG_AXIS = {"type": "log", "log": 10}  # latency axes: the rollups' buckets are log-width
# what an empty panel says: a value not in a variable's list, an unknown campaign and an empty
# time window all match no row (never an SQL error)
NO_DATA = "No records for this selection: check the time range and the variables (a value not in their lists matches nothing)"
REPORT_URL = "/report/"  # where the deployment serves `dnscamp report --html`'s site (docs/dashboards.md)


def _common(b: Any, title: str, description: str, sql: str, fmt: Format, columns: Columns | None,
            w: int, h: int, unit: str | None, *, interval: str | None = None, tooltip_only: tuple[str, ...] = (),
            log_axis: tuple[str, ...] = ()) -> Any:
    """``interval``: the panel's minimum interval (HOURLY, DAILY); ``tooltip_only``: columns shown
    in the tooltip only; ``log_axis``: columns whose axis is logarithmic."""
    b = (b.title(title).description(" ".join(description.split())).datasource(DATASOURCE).with_target(Sql(sql, fmt)).span(w)
         .height(h).no_value(NO_DATA))
    if interval:
        b = b.interval(interval)
    if unit:
        b = b.unit(unit)
    for col, (header, col_unit) in (columns or {}).items():
        props = [DynamicConfigValue(id_val="displayName", value=header)]
        if col_unit:
            props.append(DynamicConfigValue(id_val="unit", value=col_unit))
        if col in tooltip_only:
            props.append(DynamicConfigValue(id_val="custom.hideFrom", value=TOOLTIP_ONLY))
        if col in log_axis:
            props.append(DynamicConfigValue(id_val="custom.scaleDistribution", value=LOG_AXIS))
        b = b.override_by_name(col, props)
    return b


# a time series' interval bounds: series whose name ends in " lo" / " hi", dashed and thin
BOUND_SERIES = r"/ (lo|hi)( \(n=\d+\))?$/"


def time_series(title: str, description: str, sql: str, *, unit: str = "ms", w: int = 12, h: int = 9,
                interval: str | None = None) -> Any:
    """SQL returning time, metric (series name) and one value column. A series named
    "<name> lo" or "<name> hi" (an interval's bounds) is drawn dashed, without points."""
    b = timeseries.Panel().draw_style(common.GraphDrawStyle.LINE).show_points(common.VisibilityMode.ALWAYS).span_nulls(True)
    b = b.override_by_regexp(BOUND_SERIES, [
        DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [6, 4]}),
        DynamicConfigValue(id_val="custom.lineWidth", value=1),
        DynamicConfigValue(id_val="custom.showPoints", value="never")])
    return _tooltip(_legend(_common(b, title, description, sql, "time_series", None, w, h, unit, interval=interval)))


def table_panel(title: str, description: str, sql: str, columns: Columns, *, w: int = 24, h: int = 9,
                interval: str | None = None) -> Any:
    return _common(table.Panel().show_header(True), title, description, sql, "table", columns, w, h, None, interval=interval)


def histogram_panel(title: str, description: str, sql: str, columns: Columns, *, unit: str = "ms",
                    w: int = 12, h: int = 9, interval: str | None = None) -> Any:
    """Pre-bucketed bins (``xMin``, ``xMax``, one count column per series: hist_bins) on a log x
    axis (the bins are log-width), or raw values Grafana bins; the legend sums each series'
    counts: its n."""
    b = histogram.Panel().combine(False).fill_opacity(60)
    log_axis: tuple[str, ...] = ()
    if '"xMin"' in sql:  # pre-bucketed (hist_bins); raw values are binned by Grafana, linearly
        columns, log_axis = {"xMin": ("from", unit), "xMax": ("to", unit)} | columns, ("xMin", "xMax")
    b = _common(b, title, description, sql, "table", columns, w, h, unit, interval=interval, log_axis=log_axis)
    return _tooltip(_legend(b, calcs=["sum"]))


def heatmap_panel(title: str, description: str, sql: str, *, unit: str = "ms",
                  w: int = 12, h: int = 9, interval: str | None = None, repeat: str | None = None) -> Any:
    """Pre-bucketed counts: a time column and one count column per bucket, named by the bucket's
    upper bound (Grafana's "le" rows layout, as for Prometheus histograms): nothing to compute. No
    display names: Grafana reads the bounds from the field names."""
    b = (heatmap.Panel().calculate(False).rows_frame(heatmap.RowsHeatmapOptions().layout(common.HeatmapCellLayout.LE)
                                                       .value("queries"))
         .y_axis(heatmap.YAxisConfig().unit(unit)).show_legend().mode(common.TooltipDisplayMode.SINGLE))
    if repeat:  # one heatmap per value of the variable (a transport): distributions are not pooled
        b = b.repeat(repeat).repeat_direction("h").max_per_row(3)
    # time_series: Grafana turns the epoch `time` into a time field (a table keeps it a number)
    return _common(b, title, description, sql, "time_series", None, w, h, None, interval=interval)


def xy_panel(title: str, description: str, sql: str, columns: Columns, *, series_by: str,
             unit: str = "ms", w: int = 12, h: int = 9, interval: str | None = None, log_x: bool = False) -> Any:
    """y against x, one curve per value of ``series_by``: Grafana partitions the rows into one
    frame per value, and the chart's auto mapping takes each frame's first number field (x) against
    the next (y), so the SQL returns ``series_by, x, y`` in that order. ``log_x``: a log x axis
    (the first column of ``columns``: x)."""
    b = xychart.Panel().mapping(SeriesMapping.AUTO).show(XYShowMode.LINES).series([])
    b = _tooltip(_legend(_common(b, title, description, sql, "table", columns, w, h, unit, interval=interval,
                                 log_axis=(next(iter(columns)),) if log_x else ())))
    return b.with_transformation(DataTransformerConfig(id_val="partitionByValues",
                                                       options={"fields": [series_by], "keepFields": False}))


def stat_panel(title: str, description: str, sql: str, columns: Columns, *, unit: str | None = None,
               w: int = 6, h: int = 5) -> Any:
    b = stat.Panel().reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(True))
    return _common(b, title, description, sql, "table", columns, w, h, unit)


def bar_panel(title: str, description: str, sql: str, columns: Columns, *, stacked: bool = False, unit: str | None = None,
              w: int = 12, h: int = 9, interval: str | None = None, tooltip_only: tuple[str, ...] = ()) -> Any:
    """Bars per row of the first (string) column; value columns side by side or stacked; the
    ``tooltip_only`` columns (n, interval bounds) in the tooltip beside them."""
    b = barchart.Panel().stacking(common.StackingMode.NORMAL if stacked else common.StackingMode.NONE).show_value(
        common.VisibilityMode.AUTO).x_tick_label_rotation(-30)
    return _tooltip(_legend(_common(b, title, description, sql, "table", columns, w, h, unit, interval=interval,
                                    tooltip_only=tooltip_only)))


def geomap_panel(title: str, description: str, sql: str, columns: Columns, *, value: str, unit: str = "ms",
                 w: int = 24, h: int = 12) -> Any:
    """One marker per row at the row's ``lat`` / ``lon`` columns (decimal degrees), sized and
    coloured (red -> green) by the number column ``value``, on Grafana's default base map; the
    view fits the markers. The tooltip lists the row's columns."""
    markers = (cb.MapLayerOptions().type("markers").name("probes").tooltip(True)
               .location(cb.FrameGeometrySource().mode(common.FrameGeometrySourceMode.COORDS).latitude("lat").longitude("lon"))
               .config({"showLegend": True, "style": {
                   "color": {"field": value, "fixed": "green"}, "opacity": 0.8,
                   "size": {"field": value, "fixed": 6, "min": 4, "max": 16},
                   "symbol": {"fixed": "img/icons/marker/circle.svg", "mode": "fixed"}}}))
    b = (geomap.Panel().basemap(cb.MapLayerOptions().type("default").name("base map")).layers([markers])
         .view(geomap.MapViewConfig().id(geomap_model.MapCenterID.FIT).all_layers(True).padding(20).max_zoom(10))
         .controls(geomap.ControlsOptions().show_zoom(True).mouse_wheel_zoom(False).show_attribution(True).show_scale(True))
         .tooltip(geomap.TooltipOptions().mode(geomap_model.TooltipMode.DETAILS))
         .color_scheme(dashboard.FieldColor().mode(FieldColorModeId.CONTINUOUS_RD_YL_GR)))
    return _common(b, title, description, sql, "table", columns, w, h, unit)


class Annotation(cogbuilder.Builder[Any]):
    """A SQL annotation query (Grafana's SQL datasources read ``time``, ``timeend``, ``text`` and
    ``tags`` from it); the SDK types an annotation's target as the built-in datasource's."""

    def __init__(self, name: str, raw_sql: str, color: str) -> None:
        self._a = dashboard.AnnotationQuery().name(name).datasource(DATASOURCE).enable(True).hide(False).icon_color(color).build()
        self._a.target = SqlQuery("Anno", raw_sql.strip(), "table")

    def build(self) -> Any:
        return self._a


# Runs as annotations (a region from each run's first to its last record of the range): read
# from the ingest rollup, one row per context x batch x day, not from the records.
RUNS = f"""
SELECT min(first_started) AS time, max(last_started) AS timeend,
       'run ' || run || ' (' || campaign || '): ' || sum(records) || ' records, ' || sum(failed) || ' failed' AS text,
       campaign AS tags
FROM v_ingest_daily
WHERE {CAMPAIGN}
  AND kind IN ('dns_query', 'page_load')
  AND last_started >= $__timeFrom()::timestamptz AND first_started <= $__timeTo()::timestamptz
GROUP BY campaign, run
ORDER BY 1"""


def links() -> list[Any]:
    """Every dashboard links to the others (time range and variables kept) and to the report."""
    return [dashboard.DashboardLink("dnscamp dashboards").type(DashboardLinkType.DASHBOARDS).tags(["dnscamp"])
            .as_dropdown(False).include_vars(True).keep_time(True).target_blank(False).icon("external link")
            .tooltip("the other dnscamp dashboards, same time range and variables").url(""),
            dashboard.DashboardLink("Report").type(DashboardLinkType.LINK).url(REPORT_URL).tags([])
            .as_dropdown(False).include_vars(False).keep_time(False).target_blank(True).icon("doc")
            .tooltip("the campaign report (dnscamp report --html): figures with their n and intervals")]


Row = tuple[str, list[Any]] | tuple[str, list[Any], str]  # (title, panels[, variable the row repeats by])


def new_dashboard(uid: str, title: str, description: str, variable_names: tuple[str, ...], rows: list[Row],
                  *, time_from: str = "now-7d") -> dashboard.Dashboard:
    """A read-only dashboard (UTC, `time_from` to now) of titled rows of panels, linked to the
    other dashboards and the report, with the runs as annotations where it has campaigns. A row
    with a variable is repeated per selected value (small multiples)."""
    d = (dashboard.Dashboard(title).uid(uid).description(" ".join(description.split())).tags(["dnscamp"]).timezone("utc")
         .time(time_from, "now").refresh("").readonly().tooltip(DashboardCursorSync.CROSSHAIR).links(links()))
    if "campaign" in variable_names:
        d = d.annotation(Annotation("Runs", RUNS, "rgba(120, 120, 120, 0.5)"))
    for v in variables(*variable_names):
        d = d.with_variable(v)
    ids = iter(range(1, 1000))  # stable panel ids: links and public dashboards refer to panels by id
    for row_title, row_panels, *repeat in rows:
        r = dashboard.Row(row_title).id(next(ids)).collapsed(False)
        if repeat:
            r = r.repeat(repeat[0])
        d = d.with_row(r)
        for p in row_panels:
            d = d.with_panel(p.id(next(ids)))
    return d
