"""The DNS timing engine: one module per transport (do53, dot, doh, doh3, doq), one result
type (``timing.DnsTiming``), connection policies (``policy``), the resolver catalog
(``catalog``) and the ``dns_query`` measurement kind (``kind``). See docs/dns.md."""

from .policy import Policy
from .timing import DnsTiming, WireCount

__all__ = ["DnsTiming", "Policy", "WireCount"]
