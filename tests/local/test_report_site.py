"""The static report (dnscamp/site, docs/report.md) built from the demo campaign as the reader
role: every seed's figure with its SVG, CSV and SQL, the paper's numbers beside ours, "no data"
instead of an empty figure, page weight, the terminal report from the same SQL, and publishing
to an S3 server (moto) with the Content-Types a browser needs."""

from __future__ import annotations

import csv
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import boto3
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from typer.testing import CliRunner

from db import engine
from dnscamp.cli import app
from dnscamp.site import build as site, figures
from dnscamp.site.figures import SEEDS
from tests.scaffolding.moto_s3 import Moto
from tests.scaffolding.demo_data import CAMPAIGN, RUN, load_demo

pytestmark = pytest.mark.local
MAX_PAGE_BYTES = 2 * 1024 * 1024  # page weight <= 2 MB for the demo campaign
GRAFANA = "https://grafana.example.test"


class Refs(HTMLParser):
    """What a page loads (img src, stylesheet) and links to (a href)."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.links: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for url in (a.get("src"), a.get("href")):
            if url and re.match(r"^[a-z]+:|^//", url):
                self.external.append((tag, url))
        if tag == "img" or (tag == "link" and a.get("rel") == "stylesheet"):
            self.loads.append(a.get("src") or a["href"])
        elif tag == "a" and not re.match(r"^[a-z]+:|^//", a["href"]):
            self.links.append(a["href"])


def refs(page: Path) -> Refs:
    r = Refs()
    r.feed(page.read_text())
    return r


@pytest.fixture()
def demo_store(empty_db, monkeypatch):
    """The demo campaign in a fresh database that `dnscamp` (its reader URL) reads."""
    load_demo(empty_db)
    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", conninfo_to_dict(empty_db)["dbname"])
    return empty_db


def build(out: Path, *args: str) -> Path:
    res = CliRunner().invoke(app, ["report", "--html", str(out), *args])
    assert res.exit_code == 0, res.output
    return Path(res.output.strip())


def test_demo_site_has_every_seed_figure_with_its_data_and_sql(demo_store, tmp_path):
    index = build(tmp_path / "site", "--campaign", CAMPAIGN)
    d = index.parent
    assert index == tmp_path / "site" / "index.html"
    pages = sorted(d.glob("*.html"))
    assert [p.name for p in pages] == ["index.html"] + [f"seed-{s.key}.html" for s in SEEDS]
    reader = engine.database_url("reader", dbname=conninfo_to_dict(demo_store)["dbname"])
    with psycopg.connect(reader) as conn:  # the published SQL runs as the reader, as the site was built
        for s in SEEDS:
            text = (d / f"seed-{s.key}.html").read_text()
            assert s.file in text  # the page cites its seed
            for item in s.items:
                assert f"id='{item.slug}'" in text and "No data" not in text, (s.key, item.slug)
                sql = (d / "sql" / f"{item.slug}.sql").read_text()
                assert CAMPAIGN in sql and "%(" not in sql  # the query as run: pasteable into psql
                with open(d / "data" / f"{item.slug}.csv", newline="") as f:
                    rows = list(csv.reader(f))
                ran = conn.execute(sql).fetchall()  # the CSV is exactly what the SQL returns
                assert len(rows) - 1 == len(ran) > 0, item.slug
                if item.draw:
                    svg = (d / "fig" / f"{item.slug}.svg").read_text()
                    assert svg.startswith("<?xml") and "<svg" in svg and f"fig/{item.slug}.svg" in text
                else:
                    assert not (d / "fig" / f"{item.slug}.svg").exists() and "<table>" in text
    # the paper's numbers beside ours (seed file and section cited in the captions)
    s000 = (d / "seed-000.html").read_text()
    assert "3.43" in s000 and "2.50" in s000 and "§IV-B" in s000
    assert re.search(r"<td>doh</td><td>2</td><td>3\.\d\d</td>.*?<td>3</td><td>3\.43</td>", s000)
    s001 = (d / "seed-001.html").read_text()
    assert "36.7%" in s001 and "<td>150</td>" in s001 and "<td>474</td>" in s001
    assert "5737" in (d / "seed-003.html").read_text()
    assert "−11 ms" in (d / "seed-002.html").read_text()
    # the overview holds the terminal report's tables, from the same SQL
    ov = (d / "index.html").read_text()
    for name in ("results", "ping", "dns_query", "page_load", "quicsocks_savings"):
        assert f"id='{name}'" in ov and (d / "data" / f"{name}.csv").is_file()
    assert "113 records" in ov


def test_demo_site_is_self_contained_and_light(demo_store, tmp_path):
    d = build(tmp_path / "site", "--campaign", CAMPAIGN, "--run", RUN, "--grafana-url", GRAFANA).parent
    for page in d.glob("*.html"):
        r = refs(page)
        # no CDN, nothing fetched from elsewhere: the only references out are links to the dashboards
        assert r.external and all(tag == "a" and url.startswith(GRAFANA + "/d/") for tag, url in r.external), page.name
        loaded = [d / u for u in r.loads]
        assert all(p.is_file() for p in loaded + [d / u for u in r.links]), page.name
        weight = page.stat().st_size + sum(p.stat().st_size for p in loaded)
        assert weight <= MAX_PAGE_BYTES, f"{page.name}: {weight} bytes"
    for svg in d.glob("fig/*.svg"):
        text = svg.read_text()
        # nothing an SVG could fetch: only links inside itself (#id), no fonts, images or imports
        assert not re.search(r'href="(?!#)|<image|@import|url\((?!#)', text), svg.name
    total = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    assert total <= MAX_PAGE_BYTES, total


def test_cdfs_of_many_rows_are_sampled_within_half_a_percent(empty_db):
    # 100,000 rows per group: at most ECDF_POINTS + 2 points each, the extremes kept, every
    # point on the exact empirical CDF and no gap between points above 1 / ECDF_POINTS
    src = ("  SELECT g, x * 1.0 AS v FROM generate_series(1, 100000) AS x"
           " CROSS JOIN (VALUES ('a'), ('b')) AS t(g)")
    with psycopg.connect(empty_db) as conn:
        rows = conn.execute(figures.ecdf_sql(src, "g", "v")).fetchall()
    for g in ("a", "b"):
        pts = [(float(v), float(c)) for gg, n, v, c in rows if gg == g]
        assert len(pts) <= figures.ECDF_POINTS + 2 and pts[0] == (1.0, 1e-5) and pts[-1] == (100000.0, 1.0)
        assert all(c == v / 100000 for v, c in pts)
        assert max(b[1] - a[1] for a, b in zip(pts, pts[1:])) <= 1 / figures.ECDF_POINTS + 1e-9


def test_sections_without_data_say_so(demo_store, tmp_path):
    # "defaul_" would match the demo's Atlas label "default/<run>" if "_" were a wildcard
    d = tmp_path / "site"
    with psycopg.connect(engine.database_url("reader", dbname=conninfo_to_dict(demo_store)["dbname"])) as conn:
        site.build_campaign(conn, d, "defaul_", None)
    assert list(d.glob("fig/*.svg")) == []
    assert not any((d / "data" / f"{i.slug}.csv").exists() for s in SEEDS for i in s.items)
    for s in SEEDS:
        text = (d / f"seed-{s.key}.html").read_text()
        assert text.count("No data in this campaign") == len(s.items), s.key
        assert "<img" not in text
    assert "0 records" in (d / "index.html").read_text()


def test_refuses_a_directory_that_is_not_a_report(demo_store, tmp_path):
    mine = tmp_path / "project"
    (mine / "data").mkdir(parents=True)
    (mine / "data" / "keep.csv").write_text("precious\n")
    res = CliRunner().invoke(app, ["report", "--html", str(mine), "--campaign", CAMPAIGN])
    assert res.exit_code == 2 and "not empty and not a dnscamp report" in res.output
    assert (mine / "data" / "keep.csv").read_text() == "precious\n" and not (mine / "index.html").exists()
    build(tmp_path / "site", "--campaign", CAMPAIGN)
    (tmp_path / "site" / "fig" / "stale.svg").write_text("<svg/>")
    build(tmp_path / "site", "--campaign", CAMPAIGN)  # an earlier report is rebuilt in place, stale files gone
    assert not (tmp_path / "site" / "fig" / "stale.svg").exists()
    res = CliRunner().invoke(app, ["report", "--html", str(tmp_path / "x"), "--run", RUN])
    assert res.exit_code == 2 and "--run needs --campaign" in res.output
    # a campaign or run the store does not have: one line naming it, exit 2, nothing written
    for args, says in ((["--campaign", "defaul_"], "campaign 'defaul_' has no records in the store"),
                       (["--campaign", CAMPAIGN, "--run", "other-run"], "campaign 'default' has no run 'other-run'")):
        res = CliRunner().invoke(app, ["report", "--html", str(tmp_path / "y"), *args])
        assert res.exit_code == 2 and says in res.output and len(res.output.strip().splitlines()) == 1, res.output
        assert not (tmp_path / "y").exists()


def test_without_campaign_one_site_per_campaign(demo_store, tmp_path):
    index = build(tmp_path / "site")
    assert [u for u in refs(index).links if u != "index.html"] == [f"{CAMPAIGN}/index.html"]
    assert (tmp_path / "site" / CAMPAIGN / "seed-001.html").is_file()
    assert "../index.html" in (tmp_path / "site" / CAMPAIGN / "index.html").read_text()


def test_terminal_report_still_works(demo_store):
    res = CliRunner().invoke(app, ["campaign", "report", CAMPAIGN, "--json"])
    assert res.exit_code == 0, res.output
    sections = {s["title"].split(":")[0]: s for s in json.loads(res.output)}
    by_kind = {(r[0], r[1]): r[3] for r in sections["Records by kind and status"]["rows"]}
    assert by_kind[("dns_query", "fiber")] == 30 and by_kind[("page_load", "4g")] == 24
    assert sections["QuicSocks"]["rows"][0][0] == 20
    res = CliRunner().invoke(app, ["campaign", "report", CAMPAIGN, "--run", "other-run", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)[0]["rows"] == []


def test_publish_uploads_the_site_with_its_content_types(demo_store, tmp_path, monkeypatch):
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    m = Moto()
    m.start()
    try:
        s3 = boto3.client("s3", endpoint_url=m.url)
        s3.create_bucket(Bucket="site")
        s3.put_object(Bucket="site", Key="report/fig/stale.svg", Body=b"<svg/>")
        d = build(tmp_path / "site", "--campaign", CAMPAIGN).parent
        res = CliRunner().invoke(app, ["report", "publish", "s3://site/report", "--dir", str(d),
                                       "--endpoint-url", m.url, "--delete", "--json"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output)
        files = sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())
        assert out == {"uploaded": len(files), "deleted": 1, "index": "s3://site/report/index.html"}
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="site")["Contents"])
        assert keys == ["report/" + f for f in files]
        want = {".html": "text/html; charset=utf-8", ".svg": "image/svg+xml", ".csv": "text/csv; charset=utf-8",
                ".css": "text/css; charset=utf-8", ".sql": "text/plain; charset=utf-8"}
        for f in files:
            head = s3.head_object(Bucket="site", Key="report/" + f)
            assert head["ContentType"] == want[Path(f).suffix], f
        body = s3.get_object(Bucket="site", Key="report/seed-000.html")["Body"].read()
        assert body == (d / "seed-000.html").read_bytes()
        # without --dir it builds the site itself; a bad URI is one line, exit 2
        res = CliRunner().invoke(app, ["report", "publish", "s3://site/again", "--campaign", CAMPAIGN,
                                       "--endpoint-url", m.url])
        assert res.exit_code == 0, res.output
        assert s3.head_object(Bucket="site", Key="again/seed-001.html")["ContentType"].startswith("text/html")
        res = CliRunner().invoke(app, ["report", "publish", "site/report", "--dir", str(d)])
        assert res.exit_code == 2 and "not an s3://bucket/prefix URI" in res.output
    finally:
        m.stop()
