"""DoH3: DNS over HTTPS over HTTP/3 (QUIC) with libcurl's ngtcp2/nghttp3 (pycurl wheel;
``CURL_HTTP_VERSION_3ONLY``, ``INFO_HTTP_VERSION`` 30). Same driver as ``doh``; see there for
how phases are stamped. ``t_connected`` and ``t_tls_done`` both mark the QUIC handshake
(libcurl sets CONNECT and APPCONNECT at QUIC handshake completion). Bytes/packets: libcurl
owns the UDP datagrams and the kernel keeps no per-socket UDP counters, so ``wire_basis`` is
``unavailable`` (DoQ, which we drive ourselves, counts its datagrams)."""

from __future__ import annotations

import pycurl

from . import doh

TRANSPORT = "doh3"
ENDPOINT = "doh3"


class Client(doh.Client):
    transport = "doh3"
    http_version = pycurl.CURL_HTTP_VERSION_3ONLY
    udp = True
