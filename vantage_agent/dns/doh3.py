"""DoH3: DNS over HTTPS over HTTP/3 (QUIC) with libcurl's ngtcp2/nghttp3 (pycurl wheel;
``CURL_HTTP_VERSION_3ONLY``, ``INFO_HTTP_VERSION`` 30). Same driver as ``doh``; see there for
how phases are stamped. ``t_connected`` and ``t_tls_done`` both mark the QUIC handshake
(libcurl sets CONNECT and APPCONNECT at QUIC handshake completion). Bytes/packets: libcurl
owns the UDP datagrams and the kernel keeps no per-socket UDP counters, so they come from the
namespace's interface counters in a testbed client namespace (``netdev_count``, see doh.py) and
are ``unavailable`` elsewhere (DoQ, which we drive ourselves, counts its datagrams).

Default method GET (RFC 8484 §4.1; what Chrome sends for a ``{?dns}`` template), not POST: with
POST, libcurl hands the HEADERS to ngtcp2 first and the body (DATA + FIN) a moment later, and
ngtcp2's pacer holds that second packet behind the packets that completed the handshake, for
about 1/6 of the RTT (seen on the wire in dc-client-4g: the body left 14.4 ms after the
headers, and the server answers only once it has the body). A fresh POST therefore took 2.21
RTT on 4G and 2.41 on fiber, a reused one 1.14 on fiber; GET puts the whole request in one
packet: 2.06 / 2.31 / 1.07 (docs/benchmarks.md). ``doh_method="POST"`` is still available and
recorded as such."""

from __future__ import annotations

import pycurl

from . import doh

TRANSPORT = "doh3"
ENDPOINT = "doh3"


class Client(doh.Client):
    transport = "doh3"
    http_version = pycurl.CURL_HTTP_VERSION_3ONLY
    chooses_http_version = False
    quic = True
    counts_wire = False  # libcurl's datagrams: only a testbed namespace's interface counters see them
    default_method = "GET"
