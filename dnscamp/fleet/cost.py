"""The bill of a fleet before anything is created (`dnscamp fleet cost`, `fleet apply --dry-run`).

Every line is a count times a list price from infra/prices/ec2-on-demand.json, each price with
its source (a price page or the AWS Price List API) and the date it was read, so a reader can
redo it by hand and see how old each figure is:

- instances: instance-hours x the on-demand price of the type in the region, plus the public
  IPv4 address each instance holds (AWS bills those by the hour since 2024);
- EBS: the root volume's GiB x the gp3 price per GB-month, prorated to the hours it exists;
- S3 requests as the agent makes them (vantage_agent/ship.py): after every firing, one PUT per
  unit file, one per HAR a page load saved, one manifest per run and one status object, so
  firings per day (from the schedule's cron) x those objects per firing; the collector's GET
  per record object and manifest, and its LIST requests, a pass every ``COLLECTOR_WATCH_S``
  over each vantage's prefix plus one page per 1,000 new keys;
- S3 storage of what the agents upload, which grows linearly from zero (on average half the
  final volume is stored over the campaign), and of the noncurrent versions each status
  overwrite leaves until the bucket's lifecycle expires them (``NONCURRENT_EXPIRY_DAYS``);
- data transfer: what instances send to the Internet (page loads and queries are mostly
  downloads, which are free; the [fleet] estimate is the upstream part), uploads from regions
  other than the bucket's (same-region EC2 -> S3 is free), and, with a collector outside AWS
  ([fleet] collector_outside_aws), what it downloads, at S3's data-transfer-out price;
- Atlas credits of the spec's [atlas] part, from atlas.plan (credits, not dollars).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from dnscamp.spec import EC2_DEFAULT_INSTANCE_TYPE, CampaignSpec

PRICES = Path(__file__).resolve().parents[2] / "infra" / "prices" / "ec2-on-demand.json"
# Root volume sizes of infra/modules/vantage and whoami_dns (root_block_device.volume_size; a unit test
# reads the modules, so the bill follows them)
ROOT_VOLUME_GIB = {"vantage": 16, "whoami_dns": 8}
GIB_PER_MIB = 1 / 1024
# Days a noncurrent object version stays before the results bucket's lifecycle expires it
# (infra/modules/results_bucket reads the same figure: noncurrent_version_expiration).
NONCURRENT_EXPIRY_DAYS = 30
# `dnscamp collect --watch`'s default --interval: one listing pass per vantage prefix this often.
COLLECTOR_WATCH_S = 30.0
# An agent's status object (vantage_agent/ship.py: one small JSON document per firing, the key
# overwritten, so each firing leaves the previous body as a noncurrent version).
STATUS_OBJECT_BYTES = 2048
# Firings counted over this many days of the cron from a fixed start: four weeks hold every
# weekday pattern, and day-of-month patterns average out to within a few percent.
FIRINGS_SAMPLE_DAYS = 28
GIB = 1024**3


KINDS = {"instance-hours": "instances", "IPv4": "public IPv4", "EBS": "EBS", "data transfer": "data transfer",
         "uploads to the bucket": "data transfer", "S3": "S3"}


class CostError(ValueError):
    """A region or instance type the price table does not list (one line, naming it and the file)."""


@dataclass(frozen=True)
class Line:
    item: str  # what is billed, e.g. "m5.2xlarge instance-hours, 4g-www @ eu-central-1"
    quantity: float
    unit: str
    unit_price: float
    region: str
    source: str = ""  # where the price comes from (a price page, the Price List API)
    date: str = ""  # when it was read

    @property
    def usd(self) -> float:
        return self.quantity * self.unit_price


@dataclass
class Bill:
    campaign: str
    days: float
    lines: list[Line] = field(default_factory=list)
    atlas_credits: int | None = None
    atlas_note: str = ""
    price_date: str = ""
    price_note: str = ""
    basis: list[str] = field(default_factory=list)  # how the counts came about (firings, objects per firing)

    @property
    def total_usd(self) -> float:
        return sum(li.usd for li in self.lines)

    @property
    def per_day_usd(self) -> float:
        return self.total_usd / self.days

    def by_kind(self) -> dict[str, float]:
        """Subtotals: instances, public IPv4, EBS, data transfer, S3 (the first word(s) of each item)."""
        out: dict[str, float] = {}
        for li in self.lines:
            kind = next(k for k in KINDS if k in li.item)
            out[KINDS[kind]] = out.get(KINDS[kind], 0.0) + li.usd
        return out

    def sources(self) -> list[str]:
        """Each distinct (source, date) of the prices used, once."""
        return sorted({f"{li.source} [{li.date}]" for li in self.lines if li.source})

    def to_dict(self) -> dict:
        return {
            "campaign": self.campaign, "days": self.days, "total_usd": round(self.total_usd, 2),
            "per_day_usd": round(self.per_day_usd, 2), "atlas_credits": self.atlas_credits,
            "subtotals_usd": {k: round(v, 2) for k, v in self.by_kind().items()},
            "prices": {"file": str(PRICES.relative_to(PRICES.parents[2])), "date": self.price_date, "note": self.price_note,
                       "sources": self.sources()},
            "basis": self.basis,
            "lines": [{"item": li.item, "region": li.region, "quantity": round(li.quantity, 6), "unit": li.unit,
                       "unit_price_usd": li.unit_price, "usd": round(li.usd, 4), "price_source": li.source,
                       "price_date": li.date} for li in self.lines],
        }

    def describe(self) -> str:
        out = [f"fleet cost of campaign {self.campaign}: {self.days:g} day(s), list prices dated {self.price_date} "
               f"({PRICES.name}; re-check before spending: `dnscamp fleet prices update`)"]
        out += [f"  basis: {b}" for b in self.basis]
        width = max((len(li.item) for li in self.lines), default=10)
        for li in self.lines:
            out.append(f"  {li.item:<{width}}  {li.quantity:>14,.3f} {li.unit:<10} x ${li.unit_price:<8g} = ${li.usd:>10,.2f}"
                       f"  [{li.date}]")
        out.append("subtotals: " + ", ".join(f"{k} ${v:,.2f}" for k, v in self.by_kind().items()))
        out.append(f"total: ${self.total_usd:,.2f} (${self.per_day_usd:,.2f} per day)")
        out.append("price sources: " + "; ".join(self.sources()))
        if self.atlas_credits is not None:
            out.append(f"RIPE Atlas: {self.atlas_credits:,} credits ({self.atlas_note})")
        return "\n".join(out)


def load_prices(path: Path = PRICES) -> dict:
    return json.loads(path.read_text())


def price_of(entry: Any, prices: dict) -> tuple[float, str, str]:
    """(USD, source, date) of one table entry: ``{"usd", "source", "date"}``, or a bare number
    (a table written by hand, e.g. a test's), dated by the table."""
    if isinstance(entry, dict):
        return float(entry["usd"]), str(entry.get("source", "")), str(entry.get("date", prices.get("date", "?")))
    return float(entry), "", str(prices.get("date", "?"))


def _region(prices: dict, region: str, what: str) -> dict:
    try:
        return prices["regions"][region]
    except KeyError:
        raise CostError(f"{PRICES}: no prices for region {region!r} ({what}); known: "
                        f"{', '.join(sorted(prices['regions']))}: add it from the AWS price pages") from None


def _price(prices: dict, region: str, name: str, what: str) -> tuple[float, str, str]:
    r = _region(prices, region, what)
    try:
        return price_of(r[name], prices)
    except KeyError:
        raise CostError(f"{PRICES}: regions.{region}.{name}: missing ({what}): add it from the AWS price pages") from None


def _instance_price(prices: dict, region: str, itype: str, what: str) -> tuple[float, str, str]:
    r = _region(prices, region, what)
    try:
        return price_of(r["instance_hour"][itype], prices)
    except KeyError:
        raise CostError(f"{PRICES}: no on-demand price for {itype} in {region} ({what}); known: "
                        f"{', '.join(sorted(r['instance_hour']))}: add it with `dnscamp fleet prices update`") from None


def _line(item: str, quantity: float, unit: str, price: tuple[float, str, str], region: str) -> Line:
    usd, source, date = price
    return Line(item, quantity, unit, usd, region, source, date)


def _machine(lines: list[Line], prices: dict, *, what: str, region: str, itype: str, count: int, hours: float,
             gib: int) -> None:
    ih = count * hours
    lines.append(_line(f"{itype} instance-hours, {what}", ih, "hours", _instance_price(prices, region, itype, what), region))
    lines.append(_line(f"public IPv4 address-hours, {what}", ih, "hours", _price(prices, region, "public_ipv4_hour", what), region))
    lines.append(_line(f"EBS gp3 {gib} GiB root volume, {what}", count * gib * hours / prices["hours_per_month"],
                       "GB-months", _price(prices, region, "ebs_gp3_gb_month", what), region))


def firings_per_day(schedule) -> float:
    """The cron's firings per day, averaged over FIRINGS_SAMPLE_DAYS from a fixed start."""
    return _firings_per_day(schedule.cron)


@lru_cache(maxsize=64)
def _firings_per_day(cron: str) -> float:
    from croniter import croniter

    start = datetime(2026, 1, 5, tzinfo=timezone.utc)  # a Monday: the sample holds whole weeks
    end = start + timedelta(days=FIRINGS_SAMPLE_DAYS)
    it = croniter(cron, start - timedelta(seconds=1))
    n = 0
    while it.get_next(datetime) < end:
        n += 1
    return n / FIRINGS_SAMPLE_DAYS


@dataclass(frozen=True)
class PerFiring:
    """What one firing of one instance of a vantage uploads (vantage_agent/ship.py's order)."""

    units: int  # unit files: one object each
    hars: int  # HAR files its page loads save: one object each
    manifests: int = 1  # the run's manifest, shipped last
    statuses: int = 1  # the status object written after the firing

    @property
    def puts(self) -> int:
        return self.units + self.hars + self.manifests + self.statuses

    @property
    def collected(self) -> int:
        """Objects the collector GETs: record objects and the manifest (not HARs, not statuses)."""
        return self.units + self.manifests


def per_firing(spec: CampaignSpec) -> dict[str, PerFiring]:
    """Units and HARs of one run on an instance of each ec2 vantage (the planner's matrix: an
    instance runs its own vantage's units, dnscamp.runner.runs_here)."""
    from dnscamp import planner
    from vantage_agent.pageload.kind import PageLoadParams, load_plan

    p = planner.plan(spec, "cost", max_units=None)
    units: dict[str, int] = {}
    hars: dict[str, int] = {}
    for b in p.blocks:
        n = len(b.targets) * p.repetitions
        units[b.vantage.id] = units.get(b.vantage.id, 0) + n
        if b.kind == "page_load":
            params = PageLoadParams.model_validate(b.params)
            if params.har:
                hars[b.vantage.id] = hars.get(b.vantage.id, 0) + n * len(load_plan(params, 0))
    return {v.id: PerFiring(units.get(v.id, 0), hars.get(v.id, 0)) for v in spec.ec2_vantages()}


def bill(spec: CampaignSpec, prices: dict | None = None) -> Bill:
    """The bill of ``spec``'s fleet over its [fleet] days (raises CostError for unpriced regions/types)."""
    prices = prices if prices is not None else load_prices()
    fleet = spec.fleet
    if fleet is None:
        raise CostError(f"{spec.source or '<spec>'}: fleet: no [fleet] section (the spec has no ec2 vantages to cost)")
    hours = fleet.days * 24
    b = Bill(campaign=spec.campaign.name, days=fleet.days, price_note=prices.get("not_live", ""))
    home = fleet.home_region
    sched = spec.campaign.schedule
    fpd = firings_per_day(sched) if sched is not None else None
    plan = per_firing(spec)
    if fpd is not None:
        b.basis.append(f"schedule {sched.cron!r}: {fpd:g} firing(s) a day per instance")
    else:
        b.basis.append(f"no [campaign.schedule]: the flat [fleet] uploads_per_day ({fleet.uploads_per_day}) per instance")
    upload_gib_total = 0.0
    gets_total = 0.0
    instances = 0
    put_price = _price(prices, home, "s3_put_per_1000", "results bucket")
    for v in spec.ec2_vantages():
        count = v.instance_count or 1
        itype = v.instance_type or EC2_DEFAULT_INSTANCE_TYPE
        n_inst = count * len(v.all_regions)
        instances += n_inst
        for region in v.all_regions:
            what = f"{v.id} @ {region}"
            _machine(b.lines, prices, what=what, region=region, itype=itype, count=count, hours=hours,
                     gib=ROOT_VOLUME_GIB["vantage"])
            b.lines.append(_line(f"data transfer out to the Internet, {what}", count * fleet.egress_gib_per_day * fleet.days,
                                 "GB", _price(prices, region, "transfer_out_internet_gb", what), region))
            up = count * fleet.upload_mib_per_day * GIB_PER_MIB * fleet.days
            upload_gib_total += up
            if region != home:
                b.lines.append(_line(f"uploads to the bucket in {home}, {what}", up, "GB",
                                     _price(prices, region, "transfer_out_interregion_gb", what), region))
        pf = plan[v.id]
        if fpd is not None:
            firings = n_inst * fpd * fleet.days
            b.basis.append(f"{v.id}: per firing {pf.units} unit file(s) + {pf.hars} HAR(s) + 1 manifest + 1 status "
                           f"= {pf.puts} PUT(s); the collector GETs {pf.collected}")
            b.lines.append(_line(f"S3 PUT requests, {v.id} ({n_inst} inst x {fpd:g}/day x {fleet.days:g} d x {pf.puts} obj)",
                                 firings * pf.puts / 1000, "1000 req", put_price, home))
            gets_total += firings * pf.collected
        else:
            puts = n_inst * fleet.uploads_per_day * fleet.days
            b.lines.append(_line(f"S3 PUT requests, {v.id} ({n_inst} inst x {fleet.uploads_per_day}/day x {fleet.days:g} d)",
                                 puts / 1000, "1000 req", put_price, home))
            gets_total += puts
    if fleet.whoami_zone:
        _machine(b.lines, prices, what=f"whoami server {fleet.whoami_zone} @ {home}", region=home,
                 itype=fleet.whoami_instance_type, count=1, hours=hours, gib=ROOT_VOLUME_GIB["whoami_dns"])
    bucket = fleet.results_bucket
    prefixes = len({v.id for v in spec.ec2_vantages()})
    passes = fleet.days * 86_400 / COLLECTOR_WATCH_S
    lists = passes * prefixes + gets_total / 1000
    b.basis.append(f"collector: a pass every {COLLECTOR_WATCH_S:g} s (collect --watch) lists {prefixes} vantage "
                   f"prefix(es): {passes:,.0f} passes x {prefixes} + {math.ceil(gets_total / 1000):,} pages of 1,000 "
                   f"new keys; one GET per record object and manifest")
    b.lines.append(_line(f"S3 GET requests by the collector, bucket {bucket}", gets_total / 1000, "1000 req",
                         _price(prices, home, "s3_get_per_1000", "results bucket"), home))
    b.lines.append(_line(f"S3 LIST requests by the collector, bucket {bucket}", lists / 1000, "1000 req",
                         _price(prices, home, "s3_list_per_1000", "results bucket"), home))
    # storage grows linearly from 0 to upload_gib_total: on average half of it is stored the whole time
    b.lines.append(_line(f"S3 Standard storage, bucket {bucket}", upload_gib_total / 2 * hours / prices["hours_per_month"],
                         "GB-months", _price(prices, home, "s3_standard_gb_month", "results bucket"), home))
    if fpd is not None:
        # each status overwrite leaves the previous body as a noncurrent version for NONCURRENT_EXPIRY_DAYS
        versions = instances * fpd * fleet.days
        b.basis.append(f"noncurrent versions: {versions:,.0f} overwritten status bodies x {STATUS_OBJECT_BYTES} B, "
                       f"each kept {NONCURRENT_EXPIRY_DAYS} days until the lifecycle expires it")
        b.lines.append(_line(f"S3 noncurrent versions storage, bucket {bucket}",
                             versions * STATUS_OBJECT_BYTES / GIB * NONCURRENT_EXPIRY_DAYS * 24 / prices["hours_per_month"],
                             "GB-months", _price(prices, home, "s3_standard_gb_month", "results bucket"), home))
    if getattr(fleet, "collector_outside_aws", True):
        b.basis.append("collector outside AWS ([fleet] collector_outside_aws): every upload billed as S3 transfer out "
                       "(an upper bound: HARs left in the bucket are never downloaded)")
        b.lines.append(_line(f"S3 data transfer out to the collector, bucket {bucket}", upload_gib_total, "GB",
                             _price(prices, home, "s3_transfer_out_internet_gb", "results bucket"), home))
    dates = sorted({li.date for li in b.lines})
    b.price_date = dates[0] if len(dates) == 1 else f"{dates[0]} .. {dates[-1]}"
    if spec.atlas is not None:
        from atlas.plan import PlanError, plan as atlas_plan

        try:
            p = atlas_plan(spec.atlas_spec, label="cost")  # the label only names the query; credits do not depend on it
        except PlanError as exc:
            raise CostError(f"{spec.source or '<spec>'}: atlas: {exc}") from None
        b.atlas_credits = p.credits_total
        b.atlas_note = (f"phase 1 {p.credits_phase1:,} exact + phase 2 ~{p.credits_phase2_estimate:,} estimated, "
                        f"{spec.atlas_spec.probes_requested:,} probes; `dnscamp atlas plan` shows the requests")
    return b


# The Price List API answers in us-east-1 (and a few others) for every region's prices.
PRICING_REGION = "us-east-1"
EC2_FILTERS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}


def _on_demand_hourly(doc: dict, where: str) -> tuple[float, str]:
    """(USD per hour, SKU) of one product of the Price List: its single OnDemand term's 'Hrs' dimension."""
    dims = [d for term in doc.get("terms", {}).get("OnDemand", {}).values()
            for d in term.get("priceDimensions", {}).values() if d.get("unit") == "Hrs"]
    if len(dims) != 1:
        raise CostError(f"pricing: {where}: {len(dims)} on-demand hourly price dimensions where one is wanted")
    try:
        usd = float(dims[0]["pricePerUnit"]["USD"])
    except (KeyError, TypeError, ValueError):
        raise CostError(f"pricing: {where}: pricePerUnit.USD missing or not a number") from None
    if not math.isfinite(usd) or usd <= 0:
        raise CostError(f"pricing: {where}: pricePerUnit.USD {usd!r} is not a positive price")
    return usd, str(doc.get("product", {}).get("sku", "?"))


def instance_price(pricing, region: str, location: str | None, itype: str) -> tuple[float, str]:
    """(USD per hour, source) of a Linux on-demand shared-tenancy instance from the AWS Price List
    API (``pricing.get_products``), filtered on the table's location name (or the region code)."""
    where_filter = ("location", location) if location else ("regionCode", region)
    filters = {"instanceType": itype, where_filter[0]: where_filter[1], **EC2_FILTERS}
    where = f"{itype} in {region} ({', '.join(f'{k}={v}' for k, v in filters.items())})"
    found: list[dict] = []
    pages = pricing.get_paginator("get_products").paginate(
        ServiceCode="AmazonEC2", FormatVersion="aws_v1",
        Filters=[{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()])
    for page in pages:
        for raw in page.get("PriceList", []):
            try:
                doc = json.loads(raw)
            except (TypeError, ValueError):
                raise CostError(f"pricing: {where}: a PriceList entry is not JSON") from None
            # the same instance with SQL Server, or a license of one's own, is another operation
            if doc.get("product", {}).get("attributes", {}).get("operation", "RunInstances") == "RunInstances":
                found.append(doc)
    if len(found) != 1:
        raise CostError(f"pricing: {where}: {len(found)} products (RunInstances) where one is wanted")
    usd, sku = _on_demand_hourly(found[0], where)
    pub = found[0].get("publicationDate", "?")
    return usd, (f"AWS Price List API: pricing.get_products(AmazonEC2, {', '.join(f'{k}={v}' for k, v in filters.items())}), "
                 f"SKU {sku}, published {pub}")


def update_prices(pricing, table: dict, regions: list[str] | None = None, types: list[str] | None = None,
                  today: str | None = None) -> tuple[dict, list[str]]:
    """The table with the instance-hour prices of ``regions`` (default: every region in it) and
    their types (plus ``types``) read from the Price List API, each dated ``today``; and one line
    per price that changed. Raises CostError before changing anything if any price cannot be read."""
    today = today or datetime.now(timezone.utc).date().isoformat()
    new = json.loads(json.dumps(table))
    changed: list[str] = []
    for region in regions or sorted(new["regions"]):
        r = new["regions"].setdefault(region, {"name": region, "instance_hour": {}})
        for itype in sorted(set(r.setdefault("instance_hour", {})) | set(types or [])):
            usd, source = instance_price(pricing, region, r.get("pricing_location"), itype)
            old = r["instance_hour"].get(itype)
            before = price_of(old, table)[0] if old is not None else None
            r["instance_hour"][itype] = {"usd": usd, "source": source, "date": today}
            if before != usd:
                changed.append(f"{itype} in {region}: {'-' if before is None else f'${before:g}'} -> ${usd:g} per hour")
    new["date"] = today
    return new, changed
