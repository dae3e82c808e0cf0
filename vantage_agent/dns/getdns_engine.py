"""The ``getdns`` engine: Do53 (UDP) and DoT through libgetdns (the stub the WWW'20 tool timed
with, 002_6fa4cf280535d36b.txt §3.1.2), beside our own engine (docs/dns-engines.md).

What it records: ``t_start`` / ``t_response`` are our CLOCK_MONOTONIC stamps right before and
right after the synchronous ``Context.general()`` call; getdns's own timing of the call is
``engine_run_time_ms`` (call_reporting ``run_time/ms``, whole ms). getdns exposes no connect /
handshake / send time, no bytes or packets, no ALPN and no resumption flag: those fields are
null (``wire_basis`` ``unavailable``), never estimated; so is ``response_size`` (see
``_parsed_from_tree``). rcode and answers are written in our engine's presentation format.
getdns drops an undecodable reply and waits: a malformed response is a ``timeout`` here.

Connection policy: ``fresh`` = a new getdns context per query (nothing carried over: no
connection, no TLS session); ``reuse`` = one context with getdns's ``idle_timeout`` set, and a
new context once the connection has been idle for ``idle_timeout_s``, because getdns's own idle
timer only fires while an event loop runs (TOOLCHAIN.md); ``resume`` is not supported (the
binding cannot carry a TLS session between contexts): the spec/CLI refuse it, and a client
asked for it anyway returns ``bad_input`` records without sending anything.

Why a worker process: the binding holds the GIL for the whole synchronous call (a Python
server or thread in the same process cannot run meanwhile) and its context destructor calls
``wait()`` for *any* child process (it blocks while one runs and may reap another's status).
So each client runs getdns in its own child ``python -m vantage_agent.dns.getdns_engine``,
which has no children; it stamps the times itself (CLOCK_MONOTONIC is one clock for every
process of the host), so the pipe between us is outside the timed interval. The private CA of
the testbed goes in as ``SSL_CERT_FILE`` of that child only (the binding has no CA-file option).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from vantage_agent import errors

from . import _common as c
from .policy import Policy
from .timing import DnsTiming, WireCount, failed

ENGINE = "getdns"
_UNSUPPORTED_POLICY = "resume"


class _Client(c.Capabilities):
    """Parent side: one worker process per client, one JSON line per query each way."""

    transport = "do53"

    def __init__(self, endpoint: c.Endpoint, policy: Policy | None = None, options: c.QueryOptions | None = None):
        self.endpoint = endpoint
        self.policy = policy or Policy()
        self.options = options or c.QueryOptions()
        self.engine = ENGINE
        self.engine_version: str | None = None
        self._proc: subprocess.Popen | None = None
        if self.policy.mode == _UNSUPPORTED_POLICY:
            return  # every query is a bad_input record (below); no worker needed
        cfg = {"transport": self.transport, "tls": self.encrypted,
               "address": self.endpoint.address, "port": self.endpoint.port,
               "tls_name": self.endpoint.tls_name, "policy": self.policy.mode,
               "idle_timeout_s": self.policy.idle_timeout_s, "timeout_s": self.options.timeout_s,
               "edns_payload": self.options.edns_payload}
        env = dict(os.environ)
        if self.endpoint.ca_file:
            env["SSL_CERT_FILE"] = self.endpoint.ca_file
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "vantage_agent.dns.getdns_engine", json.dumps(cfg)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            )  # fmt: skip
            hello = self._proc.stdout.readline()
        except OSError as exc:
            raise errors.SetupError(f"getdns worker could not start: {exc}") from None
        if not hello:
            raise errors.SetupError(f"getdns worker failed: {self._stderr_tail()}")
        h = json.loads(hello)
        if h.get("error"):
            self.close()
            raise errors.SetupError(f"getdns: {h['error']}")
        self.engine_version = h["engine_version"]

    def _stderr_tail(self) -> str:
        assert self._proc is not None
        try:
            self._proc.wait(timeout=5)
            err = self._proc.stderr.read() if self._proc.stderr else ""
        except subprocess.TimeoutExpired:
            err = ""
        return errors.first_line(Exception(err.strip().splitlines()[-1] if err.strip() else "no stderr"))

    def query(self, qname: str, qtype: str = "A") -> DnsTiming:
        ep = self.endpoint
        if self._proc is None:
            base = DnsTiming(transport=self.transport, address=ep.address, port=ep.port, qname=qname, qtype=qtype,
                             policy=self.policy.mode, t_start=c.now(), timeout_s=self.options.timeout_s)
            return failed(base, errors.BadInput(
                "engine getdns does not support policy 'resume' (it cannot carry a TLS session between contexts)"
            ), attempts=0, connection_reused=None)
        try:
            self._proc.stdin.write(json.dumps({"qname": qname, "qtype": qtype}) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            base = DnsTiming(transport=self.transport, address=ep.address, port=ep.port, qname=qname, qtype=qtype,
                             policy=self.policy.mode, t_start=c.now(), timeout_s=self.options.timeout_s)
            return failed(base, errors.Other(f"getdns worker died: {self._stderr_tail()}"), attempts=0)
        return timing_from_json(json.loads(line))

    def close(self) -> None:
        p, self._proc = self._proc, None
        if p is None:
            return
        try:
            p.stdin.close()
            p.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            p.kill()
            p.wait()
        for f in (p.stdout, p.stderr):
            if f:
                f.close()

    def __enter__(self) -> "_Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Do53Client(_Client):
    transport = "do53"


class DotClient(_Client):
    transport = "dot"
    default_port = 853
    encrypted = True


def timing_from_json(d: dict[str, Any]) -> DnsTiming:
    d = dict(d)
    d["answers"] = tuple(d.get("answers") or ())
    d["details"] = tuple(sorted((d.get("details") or {}).items()))
    for k in ("handshake", "query"):
        if d.get(k) is not None:
            d[k] = WireCount(**d[k])
    return DnsTiming(**d)


# -- the worker (its own process; the only place that imports getdns) ---------------------------
class _Worker:
    def __init__(self, cfg: dict[str, Any]):
        import getdns

        self.g = getdns
        self.cfg = cfg
        self.policy = Policy(cfg["policy"], cfg["idle_timeout_s"])
        self.ctx: Any = None
        self.last_used: int | None = None
        probe = getdns.Context()
        self.version = f"getdns-python {getdns.__version__}; libgetdns {probe.get_api_information()['version_string']}"

    def _context(self) -> Any:
        g, cfg = self.g, self.cfg
        ctx = g.Context()
        ctx.resolution_type = g.RESOLUTION_STUB
        ctx.timeout = max(1, int(cfg["timeout_s"] * 1000))
        ctx.edns_maximum_udp_payload_size = cfg["edns_payload"]
        up: dict[str, Any] = {"address_data": cfg["address"], "address_type": "IPv6" if ":" in cfg["address"] else "IPv4"}
        if cfg["tls"]:
            ctx.dns_transport_list = [g.TRANSPORT_TLS]
            ctx.tls_authentication = g.AUTHENTICATION_REQUIRED
            up["tls_port"] = cfg["port"]
            if cfg.get("tls_name"):
                up["tls_auth_name"] = cfg["tls_name"]
        else:
            ctx.dns_transport_list = [g.TRANSPORT_UDP]
            up["port"] = cfg["port"]
        ctx.upstream_recursive_servers = [up]
        if self.policy.keeps_connection:
            ctx.idle_timeout = int(self.policy.idle_timeout_s * 1000)
        return ctx

    def query(self, qname: str, qtype: str) -> DnsTiming:
        g, cfg = self.g, self.cfg
        t0 = c.now()
        base = DnsTiming(transport=cfg["transport"], address=cfg["address"], port=cfg["port"], qname=qname,
                         qtype=qtype, policy=self.policy.mode, t_start=t0, timeout_s=cfg["timeout_s"])
        try:
            q = c.make_query(qname, qtype)  # the same validation as our engine: nothing sent if invalid
            rrtype = c._qtype_num(qtype)
        except errors.BadInput as exc:
            return failed(base, exc, attempts=0, connection_reused=None)
        if self.ctx is None or not self.policy.may_reuse(self.last_used, t0):
            self.ctx = None  # fresh, first query, or idle past idle_timeout_s: a new context
            self.ctx = self._context()
        ext = {"return_call_reporting": g.EXTENSION_TRUE}
        t_start = c.now()
        try:
            r = self.ctx.general(q.qname, rrtype, extensions=ext)
        except g.error as exc:
            t_end = c.now()
            self.ctx = None
            # getdns says "Generic error" for a failed TLS authentication as for a refused
            # connection: the reason is not known, so the status is not guessed
            return base.replace(t_start=t_start, status=errors.Other.status,
                                error=f"getdns {cfg['transport']}: {errors.first_line(exc)} "
                                      f"(getdns gives no reason; {(t_end - t_start) / 1e6:.1f} ms)")
        t_end = c.now()
        self.last_used = t_end
        reports = r.call_reporting or []
        rep = reports[-1] if reports else {}
        run_ms = rep.get("run_time/ms")
        details = {"engine_run_time_ms": run_ms if isinstance(run_ms, int) else None}
        reused = None
        if cfg["tls"]:
            n = rep.get("responses_on_this_connection")
            reused = bool(n and n > 1) if isinstance(n, int) else None
        else:
            reused = False  # UDP: no connection, as our engine records it
        res = base.replace(t_start=t_start, connection_reused=reused, details=tuple(details.items()),
                           tls_version=rep.get("tls_version") if cfg["tls"] else None)
        if not self.policy.keeps_connection:
            self.ctx = None
        tree = r.replies_tree or []
        if r.status == g.RESPSTATUS_ALL_TIMEOUT or not tree:
            status = errors.Timeout if r.status == g.RESPSTATUS_ALL_TIMEOUT else errors.Other
            return res.replace(status=status.status,
                               error=f"getdns status {r.status}: no response within {cfg['timeout_s']:g} s"
                               if status is errors.Timeout else f"getdns status {r.status} without a reply")
        res = res.replace(t_response=t_end)
        try:
            parsed = _parsed_from_tree(tree[0])
        except (KeyError, TypeError, ValueError) as exc:
            return res.replace(status=errors.MalformedResponse.status, error=f"getdns reply not understood: {exc}")
        res = res.replace(rcode=parsed.rcode, answers=parsed.answers)
        err = c.rcode_error(parsed)
        if err is not None:
            res = res.replace(status=err.status, error=err.message)
        return res


def _parsed_from_tree(reply: dict[str, Any]) -> c.Parsed:
    """rcode and answers (the presentation text our engine records) from getdns's reply dict.
    Not from ``replies_full``: this binding turns wire data that happens to look like a domain
    name into a string ("ErrorLABELTYPE80IsUnknown"), depending on the random query id. The
    reply's size is therefore not known (``response_size`` null)."""
    import dns.ipv6
    import dns.rcode
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype

    answers = []
    for rr in reply.get("answer", []):
        rtype, rd = rr["type"], rr["rdata"]
        if rtype == 1:
            text = ".".join(str(b) for b in bytes(rd["ipv4_address"]))
        elif rtype == 28:
            text = dns.ipv6.inet_ntoa(bytes(rd["ipv6_address"]))
        elif isinstance(rd.get("rdata_raw"), str):  # a name, already made text by the binding
            text = rd["rdata_raw"]
        else:
            raw = bytes(rd["rdata_raw"])
            text = dns.rdata.from_wire(dns.rdataclass.IN, rtype, raw, 0, len(raw)).to_text()
        answers.append(f"{rr['name']} {dns.rdatatype.to_text(rtype)} {text}")
    return c.Parsed(rcode=dns.rcode.to_text(reply["header"]["rcode"]), answers=tuple(answers), size=0, truncated=False)


def _worker_main(cfg_json: str) -> int:
    cfg = json.loads(cfg_json)
    out = sys.stdout
    try:
        w = _Worker(cfg)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a setup error
        out.write(json.dumps({"error": f"{type(exc).__name__}: {errors.first_line(exc)}"}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"engine_version": w.version}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        try:
            t = w.query(req["qname"], req["qtype"])
        except Exception as exc:  # noqa: BLE001 - a bug or a library surprise is still a record
            base = DnsTiming(transport=cfg["transport"], address=cfg["address"], port=cfg["port"], qname=req["qname"],
                             qtype=req["qtype"], policy=cfg["policy"], t_start=c.now(), timeout_s=cfg["timeout_s"])
            t = failed(base, errors.Other(f"getdns: {type(exc).__name__}: {errors.first_line(exc)}"))
            w.ctx = None
        out.write(json.dumps(t.to_dict()) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(_worker_main(sys.argv[1]))
