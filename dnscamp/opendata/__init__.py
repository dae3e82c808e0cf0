"""Open data and the archive tier: records as Parquet (the archive, `dnscamp
archive`), exports of a campaign (`dnscamp export`), and SQL over an archive with DuckDB
(`dnscamp sql`). docs/archive.md describes the layout and the manifest.

- ``codec``: one record <-> one row of its kind's Arrow table (typed body columns), lossless;
- ``archive``: write (directory or s3://), verify, restore;
- ``duck``: DuckDB views of the same names and columns as the store's ``v_`` views;
- ``export``: jsonl / parquet / csv exports with a README.
"""
