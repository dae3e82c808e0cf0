"""The campaign report as a static site: `dnscamp report --html DIR` (build.py, the
seeds' figures in figures.py) and `dnscamp report publish s3://...` (publish.py). docs/report.md."""
