"""The error taxonomy of dnscamp measurements.

A failed measurement is a record like any other: its ``status`` is the name of one of the
classes below (``MeasurementError.status``), its ``error`` the human-readable reason. Library
exceptions are translated into this tree at the boundary of each measurement module (the
httpx ``_exceptions.py`` pattern), so no caller ever sees a raw socket or TLS exception, and no
failure is ever stored as a zero.

The documented list lives in docs/records.md; tests check that both agree.
"""

from __future__ import annotations

import functools


def first_line(exc: BaseException) -> str:
    """An exception as one line (its message's first non-empty line, else its class name):
    for reasons and errors that are stored or printed one per line."""
    return next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)


class MeasurementError(Exception):
    """Base of every failure that ends up as a record. ``status`` is what is stored."""

    status = "other"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# -- network-level ------------------------------------------------------------------------
class Timeout(MeasurementError):
    """No answer within the configured timeout (after the configured retries)."""

    status = "timeout"


class Unreachable(MeasurementError):
    """The network said no: ICMP host/network unreachable, no route."""

    status = "unreachable"


class ConnectError(MeasurementError):
    """A connection could not be established (refused, reset during connect)."""

    status = "connect_error"


class TlsError(MeasurementError):
    """TLS handshake failed; the message carries the certificate/alert reason."""

    status = "tls_error"


class QuicError(MeasurementError):
    """QUIC handshake or stream failure."""

    status = "quic_error"


class HttpError(MeasurementError):
    """HTTP answered with a non-2xx status (the message carries it)."""

    status = "http_error"


# -- DNS-level (NXDOMAIN is an rcode, not an error) ---------------------------------------
class Refused(MeasurementError):
    status = "refused"


class Servfail(MeasurementError):
    status = "servfail"


class Truncated(MeasurementError):
    """TC bit set where the transport cannot retry over TCP."""

    status = "truncated"


class MalformedResponse(MeasurementError):
    status = "malformed_response"


# -- page loads (WWW'20 Table 1) -------------------------------------------------------------
class PageLoadTimeout(MeasurementError):
    status = "page_load_timeout"


class DnsError(MeasurementError):
    """The browser could not resolve a name of the page."""

    status = "dns_error"


class DriverError(MeasurementError):
    """The browser or its WebDriver crashed or misbehaved."""

    status = "driver_error"


# -- set-up / local problems ------------------------------------------------------------------
class BadInput(MeasurementError):
    """The measurement was asked for something invalid (e.g. not a DNS name); nothing was sent."""

    status = "bad_input"


class SetupError(MeasurementError):
    """The measurement could not even start (missing tool, bad local configuration)."""

    status = "setup_error"


class Other(MeasurementError):
    """Anything not classified above; the message says what happened."""

    status = "other"


OK = "ok"


def _all_statuses() -> dict[str, str]:
    out = {OK: "The measurement succeeded."}
    stack = [MeasurementError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls is not MeasurementError:
            out.setdefault(cls.status, (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "")
    return out


@functools.cache
def statuses() -> dict[str, str]:
    """Every status a record may carry, with its one-line meaning."""
    return _all_statuses()
