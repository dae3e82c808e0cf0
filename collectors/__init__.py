"""Collectors: ingest result files (local spool or S3) and Atlas results into Postgres."""
