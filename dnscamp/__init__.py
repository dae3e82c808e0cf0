"""dnscamp: measurement campaigns on DNS transports and web performance."""

__version__ = "0.1.0"
