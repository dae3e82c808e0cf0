"""What a parser hands the writer: plain data, cheap to send from a parser process.

An `Item` is one record ready for the store, `Parsed` a chunk's records as columns of their
fields plus the parser's sums for the rollups, `Dims` the dimension values the chunk met.
Parsers (collectors/parse.py) fill them; `db.writer.store.Store` stores them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from db.writer.encode import (CONN_START, DAY_US, F4, F8, NULL, SUM_START, fields, group_field,
                              status_field)  # fmt: skip


@dataclass
class Item:
    """One record ready for the store: what the probe compares, and its COPY fields without
    the dimension ids (``reg``: result_ids after batch_id; ``row``: the kind table's after
    its ids)."""

    rid: str
    digest: bytes
    line: int
    table: int  # DNS | GENERIC
    ctx: bytes  # sha256 of the context / environment / shape (None: generic)
    env: bytes
    shape: bytes | None
    reg: bytes
    row: bytes
    month: int  # year * 12 + month - 1 of started_at (UTC): the partition
    status: str
    hourly: bytes | tuple | None  # a dns_query's or page_load's rollup row, or a summed dns_query's tuple (`rollup`)
    started: int  # started_at, µs since PG_EPOCH (ingest_daily: day, first / last, ingest lag)
    unit: str | None  # the planner unit (unit_daily)


@dataclass
class Dims:
    """Dimension values by sha256: contexts (envelope values), environments and dns shapes
    (canonical JSON)."""

    contexts: dict[bytes, tuple] = field(default_factory=dict)
    environments: dict[bytes, bytes] = field(default_factory=dict)
    shapes: dict[bytes, bytes] = field(default_factory=dict)


def tally(sums: dict, c: tuple) -> None:
    """Add one record's dns_conn_daily contribution (collectors.parse `_conn`) to a chunk's
    sums: key -> [n, failures, packets, 5 lists of buckets] (counted by `conn_rows`: Counter
    counts a list in C)."""
    s = sums.get(c[0])
    if s is None:
        s = sums[c[0]] = [0, 0, 0, [], [], [], [], []]
    s[0] += 1
    if c[1]:
        s[1] += 1
        return
    s[2] += c[2]
    for h, b in zip(s[3:], c[3:]):
        if b is not None:
            h.append(b)


_CONN_MODES = {m: fields((m,)) for m in ("fresh", "reuse", "resume")}


def conn_rows(sums: dict) -> list[bytes]:
    """A chunk's dns_conn_daily sums as binary COPY rows of CONN_COLUMNS (the histograms as
    array texts: ascending buckets, their counts)."""
    rows = []
    for (day, *key, mode), (n, f, pk, *hists) in sums.items():
        texts = []
        for h in map(Counter, hists):
            bs = sorted(h)
            texts += ("{" + ",".join(map(str, bs)) + "}", "{" + ",".join([str(h[b]) for b in bs]) + "}")
        rows.append(b"".join((CONN_START, F8(8, day * DAY_US), fields(key), _CONN_MODES[mode], F8(8, n), F8(8, f),
                              F8(8, pk), fields(texts))))  # fmt: skip
    return rows


@dataclass
class Parsed:
    """A chunk's records as columns of `Item` fields (lists of bytes and ints: cheap to send
    from a parser process, unlike one object per record)."""

    ids: list[str] = field(default_factory=list)
    hashes: list[bytes] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    rows: list[bytes] = field(default_factory=list)  # the kind table's COPY fields (Item.row)
    tables: list[int] = field(default_factory=list)
    ctxs: list[bytes] = field(default_factory=list)
    envs: list[bytes] = field(default_factory=list)
    shapes: list[bytes | None] = field(default_factory=list)
    regs: list[bytes] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    hourly: list[bytes | None] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # Item.started
    units: list[str | None] = field(default_factory=list)  # Item.unit
    # the parser's sums of its summed dns_query records (`rollup`): dns_hourly (hour, key, bucket)
    # -> [n, failures], dns_hourly_status (hour, key, status) -> n, dns_name_daily (day, key,
    # qname, status) -> n, dns_conn_daily (`tally`); `finish` turns them into `sums`
    hourly_sums: dict[tuple, list] = field(default_factory=dict)
    status_sums: dict[tuple, int] = field(default_factory=dict)
    name_sums: dict[tuple, int] = field(default_factory=dict)
    conn: dict[tuple, list] = field(default_factory=dict)
    sums: dict[str, list[bytes]] = field(default_factory=dict)  # table -> binary COPY rows (SUM_COLUMNS)
    months: set[int] = field(default_factory=set)
    dims: Dims = field(default_factory=Dims)
    bad: list[tuple[str, int, str, str]] = field(default_factory=list)  # (file, line, reason, raw)

    def add(self, it: Item) -> None:
        self.ids.append(it.rid)
        self.hashes.append(it.digest)
        self.lines.append(it.line)
        self.rows.append(it.row)
        self.tables.append(it.table)
        self.ctxs.append(it.ctx)
        self.envs.append(it.env)
        self.shapes.append(it.shape)
        self.regs.append(it.reg)
        self.statuses.append(it.status)
        h = it.hourly
        if h.__class__ is tuple:  # a summed dns_query (`rollup`)
            hour, key, bucket, status, qname, conn = h
            k = (hour, key, bucket)
            s = self.hourly_sums.get(k)
            if s is None:
                s = self.hourly_sums[k] = [0, 0]
            s[0] += 1
            if status != "ok":
                s[1] += 1
                k = (hour, key, status)
                self.status_sums[k] = self.status_sums.get(k, 0) + 1
            k = (hour // DAY_US * DAY_US, key, qname, status)
            self.name_sums[k] = self.name_sums.get(k, 0) + 1
            tally(self.conn, conn)
            h = None
        self.hourly.append(h)
        self.starts.append(it.started)
        self.units.append(it.unit)
        self.months.add(it.month)

    def finish(self) -> "Parsed":
        """The sums as binary COPY rows of SUM_COLUMNS (built in the parser process)."""
        self.sums = {
            "hourly": [b"".join((SUM_START["hourly"], F8(8, hour), group_field(key), NULL if b is None else F4(4, b),
                                 F4(4, n), F4(4, f))) for (hour, key, b), (n, f) in self.hourly_sums.items()],
            "status": [b"".join((SUM_START["status"], F8(8, hour), group_field(key), status_field(st), F4(4, n)))
                       for (hour, key, st), n in self.status_sums.items()],
            "names": [b"".join((SUM_START["names"], F8(8, day), group_field(key), fields((qname, st)), F4(4, n)))
                      for (day, key, qname, st), n in self.name_sums.items()],
            "conn": conn_rows(self.conn),
        }  # fmt: skip
        self.hourly_sums, self.status_sums, self.name_sums, self.conn = {}, {}, {}, {}
        return self
