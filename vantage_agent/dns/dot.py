"""DoT: DNS over TLS (RFC 7858), port 853, ALPN ``dot``.

Choice: the WWW'20 tool used getdns for DoT (002_6fa4cf280535d36b.txt §3.1.2). getdns
cannot give what this engine must record: its API exposes no connect / handshake-done / sent
timestamps, its ``idle_timeout`` only fires while an event loop runs (with the sync API the
connection is reused forever), and the Python binding has no CA-file option
(TOOLCHAIN.md). So DoT uses our own TCP socket (TCP_NODELAY) wrapped by CPython's ``ssl``
(OpenSSL 3): connect, handshake, send and receive are each stamped by us, reuse / idle timeout
/ session resumption are decided by ``policy.Policy``, and TCP_INFO gives bytes and segments.
"""

from __future__ import annotations

from ._stream import StreamClient

TRANSPORT = "dot"
ENDPOINT = "dot"


class Client(StreamClient):
    transport = "dot"
    default_port = 853
    encrypted = True
    alpn = "dot"
