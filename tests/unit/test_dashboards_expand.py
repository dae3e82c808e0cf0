"""dashboards/expand.py reproduces Grafana's variable interpolation and Postgres macros, the
examples taken from Grafana's documentation and sources (macros.go, interpolateVariable)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from dashboards.expand import ALL, ExpandError, Variable, expand, interpolate, macros, parse_interval

pytestmark = pytest.mark.unit
T0 = datetime(2017, 7, 18, 11, 15, 52, tzinfo=timezone.utc)
T1 = T0 + timedelta(minutes=5, microseconds=250000)


def test_time_filter_and_range_are_rfc3339_utc():
    assert macros("WHERE $__timeFilter(time_column)", T0, T1) == \
        "WHERE time_column BETWEEN '2017-07-18T11:15:52Z' AND '2017-07-18T11:20:52.25Z'"
    cet = timezone(timedelta(hours=2))
    assert macros("$__timeFrom() $__timeTo()", T0.astimezone(cet), T1) == "'2017-07-18T11:15:52Z' '2017-07-18T11:20:52.25Z'"
    assert macros("$__unixEpochFilter(t)", T0, T1) == f"t >= {int(T0.timestamp())} AND t <= {int(T1.timestamp())}"


def test_time_group_and_its_alias():
    assert macros("$__timeGroup(dateColumn, '5m')", T0, T1) == "floor(extract(epoch from dateColumn)/300)*300"
    assert macros("$__timeGroupAlias(dateColumn, 1h)", T0, T1) == 'floor(extract(epoch from dateColumn)/3600)*3600 AS "time"'
    # macros.go: a $__timeGroup directly followed by ',' is the pre-5.3 form and gets the alias
    assert macros("SELECT $__timeGroup(c, 1m), v", T0, T1) == 'SELECT floor(extract(epoch from c)/60)*60 AS "time", v'
    assert macros("ORDER BY $__timeGroup(c, 500ms))", T0, T1) == "ORDER BY floor(extract(epoch from c)/0.5)*0.5)"


def test_unknown_macro_and_bad_interval_fail_as_in_grafana():
    with pytest.raises(ExpandError, match="unknown macro"):
        macros("$__nope(x)", T0, T1)
    with pytest.raises(ExpandError, match="interval"):
        macros("$__timeGroup(c, soon)", T0, T1)
    assert parse_interval("'2d'") == 172800


def test_multi_value_and_all_are_quoted_and_escaped():
    v = {"host": Variable(("a", "o'b"), options=("a", "o'b", "c"))}
    assert interpolate("h IN ($host)", v) == "h IN ('a','o''b')"  # the SQL datasources' default
    assert interpolate("h IN (${host:sqlstring})", v) == "h IN ('a','o''b')"
    assert interpolate("${host:csv} [[host]]", v) == "a,o'b 'a','o''b'"
    every = {"host": Variable((ALL,), options=("a", "b"))}
    assert interpolate("h IN (${host:sqlstring})", every) == "h IN ('a','b')"


def test_a_single_value_variable_goes_in_raw_unless_it_is_multi_or_all():
    assert interpolate("'$x'", {"x": Variable(("v",), multi=False, include_all=False)}) == "'v'"
    assert interpolate("$x", {"x": Variable(("v",), multi=True)}) == "'v'"


def test_builtins_unknown_names_and_leftovers():
    assert interpolate("$__interval $__interval_ms $other", {}, interval="5m") == "5m 300000 $other"
    with pytest.raises(ExpandError, match="not expanded"):
        expand("SELECT $nosuchvar", {}, T0, T1)
    sql = "SELECT $__timeGroupAlias(t, $__interval) WHERE $__timeFilter(t) AND x IN (${v:sqlstring})"
    assert expand(sql, {"v": Variable(("1",))}, T0, T1, interval="1h") == (
        "SELECT floor(extract(epoch from t)/3600)*3600 AS \"time\" WHERE t BETWEEN '2017-07-18T11:15:52Z' "
        "AND '2017-07-18T11:20:52.25Z' AND x IN ('1')")
