"""The writer: the one place in live code that encodes COPY rows for the store and writes the
rollups (ARCHITECTURE.md, the floors: collectors read, parse and quarantine, then call this).

- `db.writer.encode`: binary COPY fields, column lists, canonical JSON, histogram buckets;
- `db.writer.batch`: what a parser hands over (`Item`, `Parsed`, `Dims`: plain data);
- `db.writer.store`: `Store`, dimension ids, partitions, the COPY of a batch's records;
- `db.writer.rollups`: the rollup upserts and their VACUUM between batches.

Nothing here imports collectors/: a parsed batch arrives as plain data.
"""
