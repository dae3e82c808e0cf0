"""The collectors' exception tree: what ends an ingest or a collect run (a single bad line never
does: it is quarantined)."""


class IngestError(Exception):
    """A path that cannot be ingested at all (missing, unreadable)."""


class StoreUnavailable(IngestError):
    """The database could not be reached or went away during the run."""


class CountMismatch(IngestError):
    """COPY stored a different number of rows than were sent (the batch is rolled back)."""
