"""The bill of a fleet before anything is created (`dnscamp fleet cost`, `fleet apply --dry-run`).

Every line is a quantity times a list price from infra/prices/ec2-on-demand.json (shipped with
its date and sources, never fetched live), so a reader can redo it by hand:

- instances: instance-hours x the on-demand price of the type in the region, plus the public
  IPv4 address each instance holds (AWS bills those by the hour since 2024);
- EBS: the root volume's GiB x the gp3 price per GB-month, prorated to the hours it exists;
- S3 (home region): PUT requests, and storage of what the agents upload, which grows linearly
  from zero, so on average half the final volume is stored over the campaign;
- data transfer: what instances send to the Internet (page loads and queries are mostly
  downloads, which are free; the [fleet] estimate is the upstream part), plus uploads from
  regions other than the bucket's (same-region EC2 -> S3 is free);
- Atlas credits of the spec's [atlas] part, from atlas.plan (credits, not dollars).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from dnscamp.spec import EC2_DEFAULT_INSTANCE_TYPE, CampaignSpec

PRICES = Path(__file__).resolve().parents[2] / "infra" / "prices" / "ec2-on-demand.json"
# Root volume sizes of infra/modules/vantage and whoami_dns (root_block_device.volume_size; a unit test
# reads the modules, so the bill follows them)
ROOT_VOLUME_GIB = {"vantage": 16, "whoami_dns": 8}
GIB_PER_MIB = 1 / 1024


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

    def to_dict(self) -> dict:
        return {
            "campaign": self.campaign, "days": self.days, "total_usd": round(self.total_usd, 2),
            "per_day_usd": round(self.per_day_usd, 2), "atlas_credits": self.atlas_credits,
            "subtotals_usd": {k: round(v, 2) for k, v in self.by_kind().items()},
            "prices": {"file": str(PRICES), "date": self.price_date, "note": self.price_note},
            "lines": [{"item": li.item, "region": li.region, "quantity": round(li.quantity, 6), "unit": li.unit,
                       "unit_price_usd": li.unit_price, "usd": round(li.usd, 4)} for li in self.lines],
        }

    def describe(self) -> str:
        out = [f"fleet cost of campaign {self.campaign}: {self.days:g} day(s), on-demand list prices of "
               f"{self.price_date} ({PRICES.name}; not fetched live: re-check before spending)"]
        width = max((len(li.item) for li in self.lines), default=10)
        for li in self.lines:
            out.append(f"  {li.item:<{width}}  {li.quantity:>12,.3f} {li.unit:<10} x ${li.unit_price:<8g} = ${li.usd:>10,.2f}")
        out.append("subtotals: " + ", ".join(f"{k} ${v:,.2f}" for k, v in self.by_kind().items()))
        out.append(f"total: ${self.total_usd:,.2f} (${self.per_day_usd:,.2f} per day)")
        if self.atlas_credits is not None:
            out.append(f"RIPE Atlas: {self.atlas_credits:,} credits ({self.atlas_note})")
        return "\n".join(out)


def load_prices(path: Path = PRICES) -> dict:
    return json.loads(path.read_text())


def _region(prices: dict, region: str, what: str) -> dict:
    try:
        return prices["regions"][region]
    except KeyError:
        raise CostError(f"{PRICES}: no prices for region {region!r} ({what}); known: "
                        f"{', '.join(sorted(prices['regions']))}: add it from the AWS price pages") from None


def _instance_price(prices: dict, region: str, itype: str, what: str) -> float:
    r = _region(prices, region, what)
    try:
        return r["instance_hour"][itype]
    except KeyError:
        raise CostError(f"{PRICES}: no on-demand price for {itype} in {region} ({what}); known: "
                        f"{', '.join(sorted(r['instance_hour']))}: add it from the AWS price pages") from None


def _machine(lines: list[Line], prices: dict, *, what: str, region: str, itype: str, count: int, hours: float,
             gib: int) -> None:
    r = _region(prices, region, what)
    ih = count * hours
    lines.append(Line(f"{itype} instance-hours, {what}", ih, "hours", _instance_price(prices, region, itype, what), region))
    lines.append(Line(f"public IPv4 address-hours, {what}", ih, "hours", r["public_ipv4_hour"], region))
    lines.append(Line(f"EBS gp3 {gib} GiB root volume, {what}", count * gib * hours / prices["hours_per_month"],
                      "GB-months", r["ebs_gp3_gb_month"], region))


def bill(spec: CampaignSpec, prices: dict | None = None) -> Bill:
    """The bill of ``spec``'s fleet over its [fleet] days (raises CostError for unpriced regions/types)."""
    prices = prices if prices is not None else load_prices()
    fleet = spec.fleet
    if fleet is None:
        raise CostError(f"{spec.source or '<spec>'}: fleet: no [fleet] section (the spec has no ec2 vantages to cost)")
    hours = fleet.days * 24
    b = Bill(campaign=spec.campaign.name, days=fleet.days, price_date=prices.get("date", "?"),
             price_note=prices.get("not_live", ""))
    home = fleet.home_region
    upload_gib_total = 0.0
    puts_total = 0
    for v in spec.ec2_vantages():
        count = v.instance_count or 1
        itype = v.instance_type or EC2_DEFAULT_INSTANCE_TYPE
        for region in v.all_regions:
            what = f"{v.id} @ {region}"
            _machine(b.lines, prices, what=what, region=region, itype=itype, count=count, hours=hours,
                     gib=ROOT_VOLUME_GIB["vantage"])
            r = _region(prices, region, what)
            b.lines.append(Line(f"data transfer out to the Internet, {what}", count * fleet.egress_gib_per_day * fleet.days,
                                "GB", r["transfer_out_internet_gb"], region))
            up = count * fleet.upload_mib_per_day * GIB_PER_MIB * fleet.days
            upload_gib_total += up
            puts_total += count * fleet.uploads_per_day * fleet.days
            if region != home:
                b.lines.append(Line(f"uploads to the bucket in {home}, {what}", up, "GB", r["transfer_out_interregion_gb"], region))
    if fleet.whoami_zone:
        _machine(b.lines, prices, what=f"whoami server {fleet.whoami_zone} @ {home}", region=home,
                 itype=fleet.whoami_instance_type, count=1, hours=hours, gib=ROOT_VOLUME_GIB["whoami_dns"])
    h = _region(prices, home, "results bucket")
    b.lines.append(Line(f"S3 PUT requests, bucket {fleet.results_bucket}", puts_total / 1000, "1000 req", h["s3_put_per_1000"], home))
    # storage grows linearly from 0 to upload_gib_total: on average half of it is stored the whole time
    b.lines.append(Line(f"S3 Standard storage, bucket {fleet.results_bucket}", upload_gib_total / 2 * hours / prices["hours_per_month"],
                        "GB-months", h["s3_standard_gb_month"], home))
    if spec.atlas is not None:
        from atlas.plan import PlanError, plan

        try:
            p = plan(spec.atlas_spec, label="cost")  # the label only names the query; credits do not depend on it
        except PlanError as exc:
            raise CostError(f"{spec.source or '<spec>'}: atlas: {exc}") from None
        b.atlas_credits = p.credits_total
        b.atlas_note = (f"phase 1 {p.credits_phase1:,} exact + phase 2 ~{p.credits_phase2_estimate:,} estimated, "
                        f"{spec.atlas_spec.probes_requested:,} probes; `dnscamp atlas plan` shows the requests")
    return b
