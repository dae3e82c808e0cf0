"""The real ripe.atlas.cousteau client against a fake Atlas API on loopback (HTTPS, recorded
response shapes in tests/fixtures/atlas/api/), and the result stream (WebSocket) that drops."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from atlas import client
from atlas.key import ApiKey

pytestmark = pytest.mark.local
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "atlas"
API = FIX / "api"
SECRET = "5e3f0a11-2222-4b4b-8c8c-abcdefabcdef"
EXAMPLE = Path(__file__).resolve().parents[2] / "atlas" / "examples" / "quicsocks-de.toml"


def _cert(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    k = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-atlas")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(k.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(k, hashes.SHA256())
    )
    c, kp = tmp / "cert.pem", tmp / "key.pem"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    kp.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return c, kp


class FakeAtlas:
    """Scripted responses per (method, path): a list of (status, body file or object)."""

    def __init__(self, tmp: Path):
        self.script: dict[tuple[str, str], list[tuple[int, object]]] = {}
        self.seen: list[dict] = []
        fake = self

        class H(BaseHTTPRequestHandler):
            def _serve(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                path = self.path.split("?")[0]
                fake.seen.append({"method": method, "path": self.path, "headers": dict(self.headers),
                                  "body": json.loads(body) if body else None})
                queue = fake.script.get((method, path)) or [(404, {"error": {"status": 404, "title": "Not Found"}})]
                status, payload = queue.pop(0) if len(queue) > 1 else queue[0]
                data = (payload.read_bytes() if isinstance(payload, Path) else json.dumps(payload).encode())
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def log_message(self, *a):
                pass

        self.cert, key = _cert(tmp)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.server = f"127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def fake(tmp_path):
    f = FakeAtlas(tmp_path)
    yield f
    f.close()


def _results_array(tmp: Path) -> Path:
    rows = [json.loads(x) for x in (FIX / "sagan_ping.jsonl").read_text().splitlines() if x.strip()]
    p = tmp / "results.json"
    p.write_text(json.dumps(rows))
    return p


NO_WAIT = client.Backoff(base_s=0.01, max_delay_s=0.02, max_attempts=4, jitter=False)


def test_fetch_retries_on_429_and_503_then_returns_results(fake, tmp_path):
    arr = _results_array(tmp_path)
    fake.script[("GET", "/api/v2/measurements/1000192/results")] = [(429, API / "error_429.json"),
                                                                      (503, {"detail": "maintenance"}), (200, arr)]
    got = client.fetch_results(1000192, server=fake.server, verify=str(fake.cert), policy=NO_WAIT, sleep=lambda s: None)
    assert len(got) == 8 and got[2]["fw"] == 4460
    assert [s["path"].split("?")[0] for s in fake.seen] == ["/api/v2/measurements/1000192/results"] * 3


def test_fetch_gives_up_on_4xx_at_once(fake):
    fake.script[("GET", "/api/v2/measurements/5/results")] = [(400, API / "error_400.json")]
    with pytest.raises(client.AtlasApiError) as ei:
        client.fetch_results(5, server=fake.server, verify=str(fake.cert), policy=NO_WAIT, sleep=lambda s: None)
    assert ei.value.status == 400 and len(fake.seen) == 1


def test_submit_sends_the_planned_body_with_the_key_only_in_the_header(fake):
    from atlas.plan import plan
    from atlas.spec import load_spec

    p = plan(load_spec(EXAMPLE), label="rtest")
    fake.script[("POST", "/api/v2/measurements/")] = [(429, API / "error_429.json"), (201, API / "create_201.json")]
    out = client.submit(p, ApiKey(SECRET), server=fake.server, verify=str(fake.cert), policy=NO_WAIT,
                        sleep=lambda s: None)
    assert out[0]["role"] == "resolver_dns" and out[0]["msm_ids"] == [91000001]
    assert out[1]["role"] == "probe_server" and out[1]["msm_ids"] == [91000002]
    last = fake.seen[-1]
    assert last["headers"]["Authorization"] == f"Key {SECRET}"
    sent = json.loads(json.dumps(last["body"], sort_keys=True))
    assert sent == p.requests[0].body  # the dry-run printed exactly what was sent
    assert SECRET not in json.dumps(last["body"]) and SECRET not in last["path"]


def test_submit_does_not_retry_a_500(fake):
    from atlas.plan import plan
    from atlas.spec import load_spec

    fake.script[("POST", "/api/v2/measurements/")] = [(500, {"detail": "oops"})]
    with pytest.raises(client.AtlasApiError):
        client.submit(plan(load_spec(EXAMPLE)), ApiKey(SECRET), server=fake.server, verify=str(fake.cert),
                      policy=NO_WAIT, sleep=lambda s: None)
    assert len(fake.seen) == 1  # a POST that may have created something is never repeated


def test_cli_submit_and_fetch_never_show_the_key(fake, tmp_path, monkeypatch, caplog, empty_db):
    from dnscamp.cli import app

    monkeypatch.setenv("RIPE_ATLAS_KEY", SECRET)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(fake.cert))
    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", empty_db.split("/")[3].split("?")[0])
    fake.script[("POST", "/api/v2/measurements/")] = [(201, API / "create_201.json")]
    fake.script[("GET", "/api/v2/measurements/91000002/results")] = [(200, _results_array(tmp_path))]
    caplog.set_level("DEBUG")
    r1 = CliRunner().invoke(app, ["atlas", "submit", str(EXAMPLE), "--yes", "--json", "--server", fake.server])
    assert r1.exit_code == 0, r1.output
    assert json.loads(r1.stdout)[1]["msm_ids"] == [91000002]
    out = tmp_path / "r.jsonl"
    r2 = CliRunner().invoke(app, ["atlas", "fetch", "91000002", "--server", fake.server, "-o", str(out)])
    assert r2.exit_code == 0, r2.output
    assert len(out.read_text().splitlines()) == 8
    for text in (r1.stdout, r1.stderr, r2.stdout, r2.stderr, caplog.text, out.read_text()):
        assert SECRET not in text
    assert fake.seen[0]["headers"]["Authorization"] == f"Key {SECRET}"
    with psycopg.connect(empty_db) as c:
        roles = c.execute("SELECT msm_id, role, campaign FROM atlas_measurements ORDER BY msm_id").fetchall()
    assert roles == [(91000001, "resolver_dns", "quicsocks-de"), (91000002, "probe_server", "quicsocks-de")]


# -- the stream --------------------------------------------------------------------------------
class FakeStream:
    """A WebSocket server speaking Atlas's stream protocol (JSON [event, payload] messages).
    Connection 1 sends two results and then drops without a close frame; connection 2 sends
    one already seen (a replay) and two new ones."""

    def __init__(self, batches):
        self.batches = batches
        self.subscriptions: list[list] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        from wsproto import ConnectionType, WSConnection
        from wsproto.events import AcceptConnection, Request, TextMessage

        for i, batch in enumerate(self.batches):
            conn, _ = self.sock.accept()
            ws = WSConnection(ConnectionType.SERVER)
            subs: list = []
            self.subscriptions.append(subs)
            conn.settimeout(5)
            while len(subs) < 2:
                data = conn.recv(65536)
                if not data:
                    break
                ws.receive_data(data)
                for ev in ws.events():
                    if isinstance(ev, Request):
                        conn.sendall(ws.send(AcceptConnection()))
                    elif isinstance(ev, TextMessage):
                        subs.append(json.loads(ev.data))
            for r in batch:
                conn.sendall(ws.send(TextMessage(data=json.dumps(["atlas_result", r]))))
            if i < len(self.batches) - 1:
                conn.close()  # abrupt drop: no close frame (the cousteau #43 situation)
            else:
                self.stop.wait(10)
                conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


def test_stream_reconnects_and_resubscribes_by_itself():
    rows = [json.loads(x) for x in (FIX / "sagan_ping.jsonl").read_text().splitlines() if x.strip()]
    for i, r in enumerate(rows):
        r["timestamp"] = 1_700_000_000 + i
    srv = FakeStream([rows[:2], [rows[1], rows[2], rows[3]]])
    stats = client.StreamStats()
    try:
        got = list(client.stream_results([1000192, 1004041], seconds=3, base_url=f"http://127.0.0.1:{srv.port}",
                                         policy=client.Backoff(base_s=0.05, max_delay_s=0.1, jitter=False,
                                                               max_attempts=10**6), stats=stats))
    finally:
        srv.close()
    assert [r["timestamp"] for r in got] == [1_700_000_000 + i for i in range(4)]
    assert stats.connects == 2 and stats.subscriptions_sent == 4
    for subs in srv.subscriptions:  # both measurements subscribed again on the new connection
        assert sorted(s[1]["msm"] for s in subs) == [1000192, 1004041]
        assert all(s[0] == "atlas_subscribe" and s[1]["stream_type"] == "result" for s in subs)
