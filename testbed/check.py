"""`dnscamp testbed check`: the fidelity self-test of the emulated access links, and the
``link_check`` measurement kind.

For each client profile, across exactly its access link (``dc-client-<p>`` <-> an endpoint on
``dc-isp``'s side of the link):

- UDP round trips: ``probes`` echo probes, paced (not one at a time), timed with kernel
  receive timestamps (SO_TIMESTAMPNS); p5 / p50 / p95 versus the configured RTT plus the
  probe's serialisation time at the configured rates;
- loss per direction over ``loss_packets`` datagrams, paced at <= 30 % of the link rate so the
  rate queue never drops: the lost count must fall in the binomial 99 % acceptance interval
  of the configured probability;
- TCP goodput up and down (iperf3, 2 s warm-up omitted) versus rate * 1448 / (1500 + 38)
  (MSS with timestamps over IP packet + the 38 B framing linkem counts; linkem README);
  assessed only where the direction is loss-free (with random loss TCP cannot fill a link:
  Mathis et al.);
- a QUIC handshake (aioquic client and server, throwaway self-signed certificate);
- the emulator's lateness (p50 / p99 / max of departure minus schedule) from linkem's stats.

The endpoint and the probe run as ``python -m testbed.check serve|probe`` inside the
namespaces.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import BaseModel, Field

from vantage_agent.stats import binomial_interval, percentile  # noqa: F401 (binomial_interval: check's API)

RTT_TARGET_MS = 0.2  # median RTT error <= 0.2 ms
GOODPUT_TOLERANCE = 0.05  # TCP goodput within 5 % of the configured rate (after framing)
FRAMING_BYTES = 38  # linkem counts IP packet + 38 B (Ethernet 14 + FCS 4 + preamble 8 + IFG 12)
MTU = 1500
TCP_MSS = 1448  # 1500 - 20 (IP) - 20 (TCP) - 12 (timestamps option)
PROBE_PAYLOAD = 32  # bytes of UDP payload of an RTT/loss probe
PROBE_IP_BYTES = PROBE_PAYLOAD + 28
LOAD_FRACTION = 0.3  # loss streams use at most this share of the configured rate
MAX_PPS = 5000
QUIC_ALPN = "dnscamp-check"
QUIC_NAME = "check.testbed.test"
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


# ============================================================================================
# statistics (pure)
# ============================================================================================


def loss_result(configured: float, sent: int, lost: int, bursty: bool = False) -> dict[str, Any]:
    lo, hi = binomial_interval(sent, configured)
    measured = lost / sent if sent else None
    passed = None if (bursty or not sent) else (lo <= lost <= hi)
    return {"configured": configured, "sent": sent, "lost": lost, "measured": measured,
            "interval99": [lo / sent, hi / sent] if sent else None, "passed": passed}


def rtt_tolerance(prof, n: int) -> float:
    """RTT_TARGET_MS, widened by the 99 % sampling error of a median over ``n`` probes when the
    profile has jitter (the target is about a deterministic delay; with jitter the sample median
    itself wanders). Median standard error: J / sqrt(n) for uniform +-J (density 1/2J at the
    median), 1.2533 * J / sqrt(n) for normal sd J; both directions add in quadrature."""
    if n <= 0:
        return RTT_TARGET_MS
    var = 0.0
    for d in (prof.up, prof.down):
        if d.jitter_ms > 0:
            k = 1.0 if d.jitter_dist == "uniform" else 1.2533
            var += (k * d.jitter_ms) ** 2
    return RTT_TARGET_MS + 2.576 * math.sqrt(var / n)


def expected_goodput(rate_mbps: float | None) -> float | None:
    if rate_mbps is None:
        return None
    return rate_mbps * TCP_MSS / (MTU + FRAMING_BYTES)


def serialization_ms(ip_bytes: int, rate_mbps: float | None) -> float:
    if rate_mbps is None:
        return 0.0
    return (ip_bytes + FRAMING_BYTES) * 8 / (rate_mbps * 1e3)


def stream_pps(rate_mbps: float | None) -> int:
    """Packets per second for a loss stream: <= LOAD_FRACTION of the rate, at most MAX_PPS."""
    if rate_mbps is None:
        return MAX_PPS
    pps = LOAD_FRACTION * rate_mbps * 1e6 / ((PROBE_IP_BYTES + FRAMING_BYTES) * 8)
    return int(max(50, min(MAX_PPS, pps)))


# ============================================================================================
# endpoint (runs in dc-isp): UDP echo, loss sink / source, QUIC server
# ============================================================================================


def _echo_loop(sock: socket.socket) -> None:
    while True:
        data, addr = sock.recvfrom(2048)
        if data[:1] == b"E":
            sock.sendto(data, addr)


def _pace(n: int, pps: float, send: Callable[[int], None]) -> None:
    t0 = time.monotonic()
    for i in range(n):
        due = t0 + i / pps
        now = time.monotonic()
        if due - now > 0.001:
            time.sleep(due - now)
        send(i)


class _Sink:
    """Loss sink (uplink) and source (downlink) on one UDP socket."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.up: dict[bytes, set[int]] = {}
        self.down_started: set[bytes] = set()
        self.lock = threading.Lock()

    def loop(self) -> None:
        while True:
            data, addr = self.sock.recvfrom(2048)
            kind, sid = data[:1], data[1:9]
            if kind == b"U":
                (seq,) = struct.unpack("!I", data[9:13])
                self.up.setdefault(sid, set()).add(seq)
            elif kind == b"Q":
                got = len(self.up.get(sid, ()))
                self.sock.sendto(b"R" + sid + struct.pack("!I", got), addr)
            elif kind == b"D":
                n, pps = struct.unpack("!II", data[9:17])
                with self.lock:
                    if sid in self.down_started:
                        continue
                    self.down_started.add(sid)
                threading.Thread(target=self._send_down, args=(sid, n, pps, addr), daemon=True).start()

    def _send_down(self, sid: bytes, n: int, pps: int, addr) -> None:
        pad = b"\0" * (PROBE_PAYLOAD - 13)

        def send(i: int) -> None:
            try:
                self.sock.sendto(b"d" + sid + struct.pack("!I", i) + pad, addr)
            except OSError:
                pass

        _pace(n, pps, send)


def serve(addr: str, port: int, quic_port: int, cert: str, key: str, ready_file: str | None) -> None:
    from aioquic.asyncio import serve as quic_serve
    from aioquic.quic.configuration import QuicConfiguration

    echo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    echo.bind((addr, port))
    sink_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink_sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sink_sock.bind((addr, port + 1))
    threading.Thread(target=_echo_loop, args=(echo,), daemon=True).start()
    threading.Thread(target=_Sink(sink_sock).loop, daemon=True).start()

    async def main() -> None:
        cfg = QuicConfiguration(is_client=False, alpn_protocols=[QUIC_ALPN])
        cfg.load_cert_chain(cert, key)
        await quic_serve(addr, quic_port, configuration=cfg)
        if ready_file:
            Path(ready_file).write_text("ready\n")
        await asyncio.Event().wait()

    asyncio.run(main())


# ============================================================================================
# probe (runs in the client namespace)
# ============================================================================================


def _recv_ts(sock: socket.socket, bufsize: int = 2048) -> tuple[bytes, int]:
    """(data, kernel receive time in ns, CLOCK_REALTIME)."""
    data, anc, _flags, _addr = sock.recvmsg(bufsize, socket.CMSG_SPACE(16))
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", cdata[:16])
            return data, sec * 1_000_000_000 + nsec
    return data, time.time_ns()


def probe_rtt(addr: str, port: int, n: int, interval_s: float, drain_s: float) -> list[float | None]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.connect((addr, port))
    sent_at: list[int | None] = [None] * n
    rtts: list[float | None] = [None] * n
    pad = b"\0" * (PROBE_PAYLOAD - 5)
    done = threading.Event()

    def receiver() -> None:
        sock.settimeout(0.2)
        while not done.is_set():
            try:
                data, t = _recv_ts(sock)
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                continue
            if data[:1] == b"E" and len(data) >= 5:
                (seq,) = struct.unpack("!I", data[1:5])
                if 0 <= seq < n and sent_at[seq] is not None and rtts[seq] is None:
                    rtts[seq] = (t - sent_at[seq]) / 1e6

    th = threading.Thread(target=receiver, daemon=True)
    th.start()

    def send(i: int) -> None:
        sent_at[i] = time.time_ns()
        try:
            sock.send(b"E" + struct.pack("!I", i) + pad)
        except OSError:
            pass

    _pace(n, 1 / interval_s, send)
    deadline = time.monotonic() + drain_s
    while time.monotonic() < deadline and any(r is None for r in rtts):
        time.sleep(0.02)
    done.set()
    th.join(1)
    sock.close()
    return rtts


def probe_loss(addr: str, port: int, n: int, up_pps: int, down_pps: int, drain_s: float) -> dict[str, Any]:
    """Uplink: n 'U' datagrams to the sink; downlink: ask the sink to send n 'd' datagrams."""
    sid = uuid.uuid4().bytes[:8]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.connect((addr, port + 1))
    got_down: set[int] = set()
    replies: dict[str, int] = {}
    stop = threading.Event()

    def receiver() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                data = sock.recv(2048)
            except (socket.timeout, TimeoutError, OSError):
                continue
            if data[:1] == b"d" and data[1:9] == sid:
                got_down.add(struct.unpack("!I", data[9:13])[0])
            elif data[:1] == b"R" and data[1:9] == sid:
                replies["up"] = struct.unpack("!I", data[9:13])[0]

    th = threading.Thread(target=receiver, daemon=True)
    th.start()
    down_req = b"D" + sid + struct.pack("!II", n, down_pps)
    # the request may itself be lost: repeat it (the sink starts one stream per session)
    for _ in range(3):
        sock.send(down_req)
    pad = b"\0" * (PROBE_PAYLOAD - 13)
    t_down_end = time.monotonic() + n / down_pps

    def send(i: int) -> None:
        try:
            sock.send(b"U" + sid + struct.pack("!I", i) + pad)
        except OSError:
            pass

    _pace(n, up_pps, send)
    while time.monotonic() < t_down_end:
        time.sleep(0.05)
    time.sleep(drain_s)
    # ask for the uplink count, repeatedly (the query or its reply may be lost)
    for _ in range(20):
        if "up" in replies:
            break
        sock.send(b"Q" + sid)
        t = time.monotonic() + 0.5 + drain_s
        while time.monotonic() < t and "up" not in replies:
            time.sleep(0.01)
    stop.set()
    th.join(1)
    sock.close()
    return {"up_sent": n, "up_received": replies.get("up"), "down_sent": n, "down_received": len(got_down)}


def probe_quic(addr: str, port: int, cafile: str, timeout: float) -> dict[str, Any]:
    from aioquic.asyncio import connect
    from aioquic.quic.configuration import QuicConfiguration

    async def main() -> float:
        cfg = QuicConfiguration(is_client=True, alpn_protocols=[QUIC_ALPN], server_name=QUIC_NAME)
        cfg.load_verify_locations(cafile)
        t0 = time.perf_counter()
        async with connect(addr, port, configuration=cfg, wait_connected=True):
            ms = (time.perf_counter() - t0) * 1e3
        return ms

    try:
        ms = asyncio.run(asyncio.wait_for(main(), timeout))
        return {"ok": True, "ms": ms, "error": None}
    except Exception as exc:  # reported in the record, never raised
        return {"ok": False, "ms": None, "error": f"{type(exc).__name__}: {exc}"[:300]}


def probe_main(args: argparse.Namespace) -> None:
    out: dict[str, Any] = {}
    out["rtts_ms"] = probe_rtt(args.addr, args.port, args.probes, args.interval_ms / 1e3, args.drain_s)
    out["loss"] = probe_loss(args.addr, args.port, args.loss_packets, args.up_pps, args.down_pps, args.drain_s)
    out["quic"] = probe_quic(args.addr, args.quic_port, args.cafile, timeout=10 + 20 * args.drain_s)
    sys.stdout.write(json.dumps(out) + "\n")


# ============================================================================================
# orchestration (root namespace, drives the namespaces)
# ============================================================================================


def make_cert(d: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for QUIC_NAME (EC P-256, 1 day)."""
    from datetime import timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, QUIC_NAME)])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(QUIC_NAME)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    c, k = d / "cert.pem", d / "key.pem"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    return c, k


def _iperf(client_ns: str, server_ns: str, addr: str, port: int, seconds: float, reverse: bool,
           log_dir: Path) -> tuple[float | None, str | None]:
    """TCP goodput in Mbit/s (receiver side, warm-up omitted) or (None, error)."""
    from testbed import netns

    srv = subprocess.Popen(netns.exec_argv(server_ns, ["iperf3", "-s", "-1", "-B", addr, "-p", str(port)]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(0.3)
        argv = ["iperf3", "-c", addr, "-p", str(port), "-t", str(int(math.ceil(seconds))), "-O", "2", "-J"]
        if reverse:
            argv.append("-R")
        p = subprocess.run(netns.exec_argv(client_ns, argv), capture_output=True, text=True, timeout=seconds + 30)
        (log_dir / f"iperf-{client_ns}-{'down' if reverse else 'up'}.json").write_text(p.stdout)
        try:
            data = json.loads(p.stdout)
        except ValueError:
            return None, f"iperf3 exit {p.returncode}: {p.stderr.strip()[:200]}"
        if "error" in data:
            return None, f"iperf3: {data['error']}"
        bps = data["end"]["sum_received"]["bits_per_second"]
        return bps / 1e6, None
    except (subprocess.TimeoutExpired, KeyError, OSError) as exc:
        return None, f"iperf3: {type(exc).__name__}: {exc}"
    finally:
        if srv.poll() is None:
            netns.kill_pids([srv.pid], grace=1.0)
        try:
            srv.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass


def _cpu_s(run_dir: Path, link_name: str) -> tuple[float | None, float]:
    """(CPU seconds used so far by the link's linkem process, monotonic now)."""
    now = time.monotonic()
    try:
        pid = int((Path(run_dir) / "links" / f"{link_name}.pid").read_text().strip())
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime + stime
        return ticks / os.sysconf("SC_CLK_TCK"), now
    except (OSError, ValueError, IndexError):
        return None, now


def _lateness(stats: dict | None) -> dict[str, float | None]:
    out: dict[str, float | None] = {"p50": None, "p99": None, "max": None}
    for d in ((stats or {}).get("directions") or {}).values():
        lat = (d or {}).get("lateness_ns") or {}
        for k in out:
            v = lat.get(k)
            if v is not None and lat.get("count", 1):
                out[k] = max(out[k] or 0.0, v / 1e6)
    return out


def check_profile(island, run_dir: Path, profile: str, probes: int = 500, loss_packets: int = 10000,
                  goodput_seconds: float = 4.0, port_base: int = 47000, log=lambda m: None) -> dict[str, Any]:
    """Measure one profile's access link; returns the link_check body as a dict."""
    from testbed import topology
    from testbed.profiles import GilbertElliottLoss, Profile
    from testbed.supervisor import Supervisor

    t_start = time.monotonic()
    prof = Profile.model_validate(island.profile_defs[profile])
    spec = island.access_link(profile)
    client_ns = island.client_ns(profile)
    client_addr = island.nodes[client_ns].address
    server_addr = island.isp_side_address(profile)
    up_rate, down_rate = prof.up.rate_mbps, prof.down.rate_mbps
    failures: list[str] = []
    work = Path(run_dir) / "check" / profile
    work.mkdir(parents=True, exist_ok=True)
    cert, key = make_cert(work)
    ready = work / "ready"
    ready.unlink(missing_ok=True)
    sup = Supervisor(run_dir)
    name = f"check-{profile}"
    udp_port, quic_port, iperf_port = port_base, port_base + 2, port_base + 3
    probe: dict[str, Any] = {}
    rtt_expected = (prof.rtt_ms + serialization_ms(PROBE_IP_BYTES, up_rate) + serialization_ms(PROBE_IP_BYTES, down_rate))
    jitter = prof.up.jitter_ms + prof.down.jitter_ms
    drain_s = max(1.0, (3 * (rtt_expected + 4 * jitter)) / 1e3)
    up_pps, down_pps = stream_pps(up_rate), stream_pps(down_rate)
    up_mbps = down_mbps = None
    cpu_up = cpu_down = None
    try:
        sup.stop(name)
        sup.start(name, topology.plan.ISP_NS,
                  [sys.executable, "-m", "testbed.check", "serve", "--addr", server_addr, "--port", str(udp_port),
                   "--quic-port", str(quic_port), "--cert", str(cert), "--key", str(key), "--ready-file", str(ready)],
                  ready=ready.exists, timeout=20)
        log(f"[{profile}] RTT ({probes} probes), loss ({loss_packets} packets each way at {up_pps}/{down_pps} pps), QUIC")
        # paced, not one at a time; spaced wider than the jitter range so that FIFO jitter never
        # holds one probe behind the previous one (that would bias the RTT upwards)
        interval_ms = max(4.0 if up_rate is None or up_rate >= 0.5 else 20.0,
                          4 * max(prof.up.jitter_ms, prof.down.jitter_ms) + 1)
        p = subprocess.run(
            ["ip", "netns", "exec", client_ns, sys.executable, "-m", "testbed.check", "probe", "--addr", server_addr,
             "--port", str(udp_port), "--quic-port", str(quic_port), "--cafile", str(cert), "--probes", str(probes),
             "--interval-ms", str(interval_ms), "--loss-packets", str(loss_packets), "--up-pps", str(up_pps),
             "--down-pps", str(down_pps), "--drain-s", f"{drain_s:.3f}"],
            capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            failures.append(f"probe failed: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        else:
            probe = json.loads(p.stdout.strip().splitlines()[-1])
        log(f"[{profile}] TCP goodput up then down ({goodput_seconds:.0f} s each after 2 s warm-up)")
        cpu0 = _cpu_s(run_dir, spec.name)
        up_mbps, err = _iperf(client_ns, topology.plan.ISP_NS, server_addr, iperf_port, goodput_seconds, False, work)
        cpu1 = _cpu_s(run_dir, spec.name)
        if err:
            failures.append(f"goodput up: {err}")
        down_mbps, err = _iperf(client_ns, topology.plan.ISP_NS, server_addr, iperf_port, goodput_seconds, True, work)
        cpu2 = _cpu_s(run_dir, spec.name)
        if err:
            failures.append(f"goodput down: {err}")
        # emulator CPU while a TCP flow saturates the link (share of one core, whole iperf3 run)
        if None not in cpu0 and None not in cpu1 and None not in cpu2:
            cpu_up = 100 * (cpu1[0] - cpu0[0]) / (cpu1[1] - cpu0[1])
            cpu_down = 100 * (cpu2[0] - cpu1[0]) / (cpu2[1] - cpu1[1])
    except Exception as exc:  # a setup failure is reported in the record
        failures.append(f"{type(exc).__name__}: {exc}"[:400])
    finally:
        try:
            sup.stop(name)
        except Exception as exc:
            failures.append(f"stopping the endpoint: {exc}")

    rtts = [r for r in probe.get("rtts_ms", []) if r is not None]
    p50 = percentile(rtts, 50)
    rtt_err = (p50 - rtt_expected) if p50 is not None else None
    rtt_tol = rtt_tolerance(prof, len(rtts))
    rtt_pass = None if rtt_err is None else abs(rtt_err) <= rtt_tol
    if rtt_pass is False:
        failures.append(f"median RTT {p50:.3f} ms vs expected {rtt_expected:.3f} ms (error {rtt_err:+.3f}, "
                        f"tolerance {rtt_tol:.3f})")
    if probe and len(rtts) == 0:
        failures.append("no RTT probe came back")

    loss = probe.get("loss") or {}
    lu = ld = None
    bursty_up = isinstance(prof.up.loss, GilbertElliottLoss)
    bursty_dn = isinstance(prof.down.loss, GilbertElliottLoss)
    if loss.get("up_received") is not None:
        lu = loss_result(prof.up.loss_p, loss["up_sent"], loss["up_sent"] - loss["up_received"], bursty_up)
    elif loss:
        failures.append("uplink loss count unavailable (no reply from the sink)")
    if loss.get("down_received") is not None and loss:
        ld = loss_result(prof.down.loss_p, loss["down_sent"], loss["down_sent"] - loss["down_received"], bursty_dn)
    for label, r in (("up", lu), ("down", ld)):
        if r and r["passed"] is False:
            failures.append(f"loss {label}: {r['lost']}/{r['sent']} = {r['measured']:.4%} outside the 99 % interval "
                            f"[{r['interval99'][0]:.4%}, {r['interval99'][1]:.4%}] of {r['configured']:.4%}")
    loss_conf = 1 - (1 - prof.up.loss_p) * (1 - prof.down.loss_p)
    loss_meas = (1 - (1 - lu["measured"]) * (1 - ld["measured"])) if lu and ld else None
    loss_flags = [r["passed"] for r in (lu, ld) if r and r["passed"] is not None]
    loss_pass = all(loss_flags) if loss_flags and lu and ld else None

    def gp(conf: float | None, meas: float | None, lossy: bool, label: str) -> tuple[float | None, bool | None]:
        exp = expected_goodput(conf)
        if exp is None or meas is None or lossy:
            return exp, None
        ok = abs(meas - exp) <= GOODPUT_TOLERANCE * exp
        if not ok:
            failures.append(f"goodput {label}: {meas:.2f} Mbit/s vs expected {exp:.2f} (+-{GOODPUT_TOLERANCE:.0%})")
        return exp, ok

    up_exp, up_pass = gp(up_rate, up_mbps, prof.up.loss_p > 0 or prof.down.loss_p > 0, "up")
    dn_exp, dn_pass = gp(down_rate, down_mbps, prof.up.loss_p > 0 or prof.down.loss_p > 0, "down")

    quic = probe.get("quic") or {}
    if quic and not quic.get("ok"):
        failures.append(f"QUIC handshake failed: {quic.get('error')}")

    stats = topology.link_stats(spec, run_dir)
    lat = _lateness(stats)
    backend = spec.backend or "none"
    measured_all = bool(probe) and up_mbps is not None and down_mbps is not None
    passed = measured_all and not failures
    return {
        "profile": profile, "link": spec.name, "backend": backend,
        "client_ns": client_ns, "client_address": client_addr, "server_address": server_addr,
        "link_config": {"up": spec.a_to_b, "down": spec.b_to_a},
        "probes_sent": len(probe.get("rtts_ms", [])), "probes_received": len(rtts),
        "probe_wire_bytes": PROBE_IP_BYTES + FRAMING_BYTES,
        "rtt_ms_configured": round(prof.rtt_ms, 4), "rtt_ms_expected": round(rtt_expected, 4),
        "rtt_ms_p5": _r(percentile(rtts, 5)), "rtt_ms_p50": _r(p50), "rtt_ms_p95": _r(percentile(rtts, 95)),
        "rtt_error_ms": _r(rtt_err), "rtt_tolerance_ms": _r(rtt_tol), "rtt_pass": rtt_pass,
        "loss_configured": loss_conf, "loss_measured": loss_meas, "loss_up": lu, "loss_down": ld, "loss_pass": loss_pass,
        "up_mbps_configured": up_rate, "up_mbps_expected": _r(up_exp), "up_mbps_measured": _r(up_mbps), "up_pass": up_pass,
        "down_mbps_configured": down_rate, "down_mbps_expected": _r(dn_exp), "down_mbps_measured": _r(down_mbps),
        "down_pass": dn_pass,
        "quic_handshake_ok": quic.get("ok"), "quic_handshake_ms": _r(quic.get("ms")), "quic_error": quic.get("error"),
        "emulator_cpu_pct_up": _r(cpu_up, 2), "emulator_cpu_pct_down": _r(cpu_down, 2),
        "lateness_p50_ms": _r(lat["p50"]), "lateness_p99_ms": _r(lat["p99"]), "lateness_max_ms": _r(lat["max"]),
        "passed": passed, "failures": failures if (failures or measured_all) else ["not every phase ran"],
        "duration_s": round(time.monotonic() - t_start, 2),
    }


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def run_check(island, run_dir: Path, profiles: list[str], probes: int = 500, loss_packets: int = 10000,
              goodput_seconds: float = 4.0, log=lambda m: None) -> list[dict[str, Any]]:
    """check_profile for each profile, one after the other (they share CPU). Returns
    [{"summary": body, "started_at": datetime, "env": {...}}]."""
    from vantage_agent.kind import utcnow

    out = []
    for i, prof in enumerate(profiles):
        started = utcnow()
        body = check_profile(island, run_dir, prof, probes=probes, loss_packets=loss_packets,
                             goodput_seconds=goodput_seconds, port_base=47000 + 10 * i, log=log)
        out.append({"summary": body, "started_at": started, "env": _env(body)})
    return out


def _env(body: dict[str, Any]) -> dict[str, Any]:
    from testbed.linkem.driver import binary_path

    return {
        "link_backend": body["backend"],
        "link_lateness_ms": {"p50": body["lateness_p50_ms"], "p99": body["lateness_p99_ms"], "max": body["lateness_max_ms"]},
        "linkem_binary": str(binary_path()),
        "iperf3": _tool_version(["iperf3", "--version"]),
    }


def _tool_version(argv: list[str]) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=5).stdout.splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def print_table(results: list[dict[str, Any]], console) -> None:
    """Configured versus measured, one column per profile."""
    from rich.table import Table

    def f(x, fmt="{:.3f}"):
        return "-" if x is None else fmt.format(x)

    t = Table(title="testbed link check: configured vs measured")
    t.add_column("")
    for r in results:
        t.add_column(r["summary"]["profile"], justify="right")
    rows: list[tuple[str, Callable[[dict], str]]] = [
        ("backend", lambda b: b["backend"]),
        ("RTT configured / expected (ms)", lambda b: f"{f(b['rtt_ms_configured'])} / {f(b['rtt_ms_expected'])}"),
        ("RTT p5 / p50 / p95 (ms)", lambda b: f"{f(b['rtt_ms_p5'])} / {f(b['rtt_ms_p50'])} / {f(b['rtt_ms_p95'])}"),
        ("median RTT error (ms)", lambda b: f(b["rtt_error_ms"], "{:+.3f}")),
        ("loss up: configured / measured", lambda b: f"{f((b.get('loss_up') or {}).get('configured'), '{:.2%}')} / "
                                                     f"{f((b.get('loss_up') or {}).get('measured'), '{:.2%}')}"),
        ("loss down: configured / measured", lambda b: f"{f((b.get('loss_down') or {}).get('configured'), '{:.2%}')} / "
                                                       f"{f((b.get('loss_down') or {}).get('measured'), '{:.2%}')}"),
        ("up Mbit/s: rate / expected / measured", lambda b: f"{f(b['up_mbps_configured'], '{:.1f}')} / "
                                                            f"{f(b['up_mbps_expected'], '{:.2f}')} / {f(b['up_mbps_measured'], '{:.2f}')}"),
        ("down Mbit/s: rate / expected / measured", lambda b: f"{f(b['down_mbps_configured'], '{:.1f}')} / "
                                                              f"{f(b['down_mbps_expected'], '{:.2f}')} / {f(b['down_mbps_measured'], '{:.2f}')}"),
        ("QUIC handshake (ms)", lambda b: (f(b["quic_handshake_ms"], "{:.1f}") if b["quic_handshake_ok"] else "FAIL")),
        ("emulator CPU during TCP up / down (% core)", lambda b: f"{f(b.get('emulator_cpu_pct_up'), '{:.1f}')} / "
                                                               f"{f(b.get('emulator_cpu_pct_down'), '{:.1f}')}"),
        ("emulator lateness p50 / p99 (ms)", lambda b: f"{f(b['lateness_p50_ms'])} / {f(b['lateness_p99_ms'])}"),
        ("targets met", lambda b: "[green]yes[/green]" if b["passed"] else "[red]NO[/red]"),
    ]
    for label, fn in rows:
        t.add_row(label, *[fn(r["summary"]) for r in results])
    console.print(t)
    for r in results:
        for fl in r["summary"]["failures"]:
            console.print(f"[red]{r['summary']['profile']}:[/red] {fl}", highlight=False)


def _unit_for(profile: str, run: str):
    from vantage_agent.kind import Unit
    from vantage_agent.records import Vantage

    return Unit(id=f"{run}/link_check/{profile}", campaign="testbed-check", run=run, kind="link_check",
                vantage=Vantage(id="testbed", provider="testbed", region=None, network_profile=profile),
                target="access", repetition=0, params={}, seed=0)


def to_record(unit, res: dict[str, Any]):
    from vantage_agent import errors
    from vantage_agent.kind import make_record
    from vantage_agent.records.link_check import LinkCheckBody

    body = LinkCheckBody.model_validate(res["summary"])
    complete = body.probes_sent > 0 and body.up_mbps_measured is not None and body.down_mbps_measured is not None
    status = errors.OK if complete else errors.SetupError.status
    error = None if complete else "; ".join(body.failures) or "check incomplete"
    return make_record(unit, started_at=res["started_at"], body=body, status=status, error=error, env=res["env"])


def spool_results(results: list[dict[str, Any]]) -> Path | None:
    from vantage_agent.paths import spool_dir
    from vantage_agent.spool import SpoolWriter

    run = "check-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    recs = [to_record(_unit_for(r["summary"]["profile"], run), r) for r in results]
    return SpoolWriter(spool_dir()).write(recs, name="link_check")


# ============================================================================================
# the link_check kind
# ============================================================================================


class LinkCheckParams(BaseModel):
    """``[kinds.link_check]`` of a campaign spec."""

    model_config = {"extra": "forbid"}
    probes: int = Field(500, ge=10)
    loss_packets: int = Field(10000, ge=100)
    goodput_seconds: float = Field(4.0, ge=1.0)


class _LinkCheckKind:
    name = "link_check"
    params_model = LinkCheckParams
    where = "host"  # manages namespaces itself

    def targets(self, params: BaseModel) -> list[str]:
        return ["access"]

    def run(self, unit, ctx) -> Iterable:
        from vantage_agent import errors
        from vantage_agent.kind import make_record, utcnow
        from vantage_agent.paths import testbed_dir

        started = utcnow()
        profile = unit.vantage.network_profile
        try:
            params = LinkCheckParams.model_validate(unit.params or {})
            from testbed import topology

            run_dir = testbed_dir()
            st = topology.read_state(run_dir)
            if os.geteuid() != 0:
                raise errors.SetupError("link_check needs root (network namespaces)")
            if not st or not topology.is_up(run_dir):
                raise errors.SetupError("the testbed is not up (dnscamp testbed up)")
            island = topology.Island.from_dict(st["island"])
            if profile not in island.profiles:
                raise errors.SetupError(f"profile {profile!r} is not a client of the running testbed "
                                        f"({', '.join(island.profiles)})")
            res = run_check(island, run_dir, [profile], probes=params.probes, loss_packets=params.loss_packets,
                            goodput_seconds=params.goodput_seconds)[0]
            yield to_record(unit, res)
        except errors.MeasurementError as exc:
            yield make_record(unit, started_at=started, body=_empty_body(profile), status=exc.status, error=exc.message)
        except Exception as exc:  # never escape: a record with a status
            yield make_record(unit, started_at=started, body=_empty_body(profile), status=errors.Other.status,
                              error=f"{type(exc).__name__}: {exc}"[:500])


def _empty_body(profile: str | None) -> dict[str, Any]:
    return {
        "profile": profile or "?", "link": "?", "backend": "none", "client_ns": "?", "client_address": "?",
        "server_address": "?", "link_config": {}, "probes_sent": 0, "probes_received": 0, "probe_wire_bytes": 0,
        "rtt_ms_configured": 0.0, "rtt_ms_expected": 0.0, "loss_configured": 0.0, "passed": False,
        "failures": ["not run"], "duration_s": 0.0,
    }


KIND = _LinkCheckKind()


# ============================================================================================
# entry points inside the namespaces
# ============================================================================================


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m testbed.check")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--addr", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--quic-port", type=int, required=True)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--ready-file")
    p = sub.add_parser("probe")
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--quic-port", type=int, required=True)
    p.add_argument("--cafile", required=True)
    p.add_argument("--probes", type=int, default=500)
    p.add_argument("--interval-ms", type=float, default=4.0)
    p.add_argument("--loss-packets", type=int, default=10000)
    p.add_argument("--up-pps", type=int, default=MAX_PPS)
    p.add_argument("--down-pps", type=int, default=MAX_PPS)
    p.add_argument("--drain-s", type=float, default=1.0)
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        serve(a.addr, a.port, a.quic_port, a.cert, a.key, a.ready_file)
    else:
        probe_main(a)


if __name__ == "__main__":
    main()
