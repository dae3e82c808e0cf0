"""Every panel's SQL on the generated campaign of the SQL-at-scale issue (bench/gen_campaign.py,
stored by the normal ingest path, at a small size): the demo campaign (test_dashboards_sql.py)
has no failures and one run per profile; the generated one has 30 days, 20 vantages, 8
resolvers, every transport, failures across the taxonomy and Atlas results of many probes,
so the panels meet the shapes a real campaign gives them (many series, many buckets, nulls)."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import dashboards
from tests.local.test_dashboards_sql import BUILT, run_panels, shape_problems

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_campaign", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

# Panels that only show what a generated campaign has none of: S3 collections and quarantined
# lines come from the pipeline (test_dashboards_sql.py checks them with a real collection).
EMPTY_ON_GENERATED = {("dnscamp-health.json", "Last upload per vantage (S3 collector)"),
                      ("dnscamp-health.json", "Quarantined lines by reason")}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen")
    gen.generate(out, dns_queries_n=20_000, page_loads_n=2_000, atlas_n=4_000, seed=3, campaign="gen")
    return out


def _range(days: int) -> tuple[datetime, datetime]:
    end = datetime.fromisoformat(gen.END.replace("Z", "+00:00")).astimezone(timezone.utc)
    return end - timedelta(days=days), end


def test_every_panel_runs_on_the_generated_campaign(generated, empty_db):
    stored = gen.load(generated, empty_db, workers=1)
    assert stored["records"] == {"ingested": 22_000, "duplicates": 0, "quarantined": 0}, stored
    selected = {"campaign": ("gen",), "atlas_campaign": ("gen/atlas",)}
    results = run_panels(empty_db, selected, _range(30))
    assert len(results) == sum(len(dashboards.panel_list(d)) for d in BUILT.values())
    assert shape_problems(results) == []
    empty = {(name.replace("-public", ""), title) for (name, title), (_, rows) in results.items() if not rows}
    assert empty == EMPTY_ON_GENERATED

    # a week's window gives fewer rows than the month's wherever the panel is over time
    week = run_panels(empty_db, selected, _range(7))
    over_time = [k for k, (cols, _) in results.items() if "time" in cols]
    assert over_time and all(len(week[k][1]) < len(results[k][1]) for k in over_time if results[k][1])
