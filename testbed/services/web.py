"""Caddy (Debian's 2.6) serving every generated site over HTTP/1.1, HTTP/2 and HTTP/3 in
``dc-web``, with one certificate of the testbed CA per hostname.

Every hostname has its own address in 10.80.0.0/16, all made local in ``dc-web`` by one
``local 10.80.0.0/16 dev lo`` route (``ensure_web_addresses``), and each site block binds
its own address (TCP and UDP 443). Binding per address matters for HTTP/3: on a wildcard UDP
socket Caddy 2.6 answers from the namespace's primary address, not the one the client
dialled, and QUIC handshakes time out. Responses carry
``Timing-Allow-Origin: *`` (Resource Timing exposes every phase), ``Access-Control-Allow-Origin: *``
and ``Cache-Control: no-store`` (a repeated load fetches again, as a fresh profile would).
Caddy announces HTTP/3 with ``Alt-Svc: h3=":443"``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from testbed import plan
from testbed.services.sites import SiteSet

HEADERS = {
    "Timing-Allow-Origin": "*",
    "Access-Control-Allow-Origin": "*",
    "Cache-Control": "no-store",
}


def caddyfile(sites: SiteSet, docroot: Path, certs: dict[str, tuple[Path, Path]], log_dir: Path) -> str:
    glob = [
        "{",
        "  admin off",
        "  auto_https disable_redirects",
        "  skip_install_trust",
        "  servers {",
        "    protocols h1 h2 h3",
        "  }",
        "}",
    ]
    blocks = []
    for host in sorted(sites.hosts):
        cert, key = certs[host]
        hdr = "\n".join(f'    {k} "{v}"' for k, v in HEADERS.items())
        blocks.append(f"""https://{host} {{
  bind {sites.hosts[host].address}
  tls {cert} {key}
  root * {Path(docroot) / host}
  header {{
{hdr}
  }}
  file_server
}}""")
    return "\n".join(glob) + "\n" + "\n".join(blocks) + "\n"


def write_config(sites: SiteSet, directory: Path, docroot: Path, certs: dict[str, tuple[Path, Path]]) -> Path:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    p = d / "Caddyfile"
    p.write_text(caddyfile(sites, docroot, certs, d))
    return p


def argv(conf: Path) -> list[str]:
    exe = shutil.which("caddy") or "/usr/bin/caddy"
    return [exe, "run", "--adapter", "caddyfile", "--config", str(conf)]


def env(directory: Path) -> dict[str, str]:
    """Keep Caddy's data/config dirs in the run dir (not the user's home)."""
    d = Path(directory) / "caddy-home"
    return {"HOME": str(d), "XDG_DATA_HOME": str(d / "data"), "XDG_CONFIG_HOME": str(d / "config")}


def ensure_web_addresses(ns: str = plan.WEB_NS) -> None:
    """Make every address of 10.80.0.0/16 local in ``ns`` (the island routes the /16 there)."""
    r = subprocess.run(["ip", "-n", ns, "route", "replace", "local", plan.WEB_SUBNET, "dev", "lo"],
                       capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        raise RuntimeError(f"ip -n {ns} route replace local {plan.WEB_SUBNET} dev lo: {r.stderr.strip()}")
