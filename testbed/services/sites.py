"""Deterministic, seeded generator of the testbed's web sites.

One call, ``generate(seed)``, gives every page, every hostname (with its own address in
10.80.0.0/16) and every file's bytes; the same seed always gives the same bytes, so a page
load on one machine can be compared with one on another. The DNS site zones
(``dns_hierarchy``), the Caddy config (``web``), the certificates and ``testbed info`` are all
derived from this one list.

Page profiles (what the papers study):

- ``single``: one small HTML page (1,256 bytes, the size of example.org's page), one host.
- ``js``: the "HTML page with Javascript" of Kosek et al. (000_6647a8606a2226e0.txt §IV-D):
  an 18,252-byte HTML page, two PNGs (15,857 and 2,039 bytes), an SVG sprite (17,229 bytes)
  and one 614-byte script, all on one host; sizes are exact.
- ``js-css``: seven scripts, two style sheets, four images and a cookie banner, one host.
- ``multi-5``, ``multi-10``, ``multi-20``, ``multi-30``: pages spread over 5 / 10 / 20 / 30
  hostnames with a dependency depth of up to 3: the HTML (depth 0) references first-party
  and "cdn" hosts (depth 1); a depth-1 loader script injects resources of "tags", "fonts",
  "widgets", "social" hosts (depth 2), whose loader scripts inject "analytics", "ads",
  "pixel", "fontfiles" resources (depth 3). A name at depth d is only discovered after the
  resource that references it has loaded, so its DNS lookup is on the critical path, as on
  real pages with third-party chains.

Every hostname has its own address and its own certificate (naming only that host), so a
browser can never coalesce two hostnames onto one connection: each hostname costs its own
DNS lookup *and* its own connection, as with independent third parties on the Internet, and
removing DNS time cannot be hidden by HTTP/2 or HTTP/3 connection reuse across hosts.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import random
import shutil
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from testbed import plan

DEFAULT_SEED = 1
PROFILES = ["single", "js", "js-css", "multi-5", "multi-10", "multi-20", "multi-30"]
MULTI_SIZES = {"multi-5": 5, "multi-10": 10, "multi-20": 20, "multi-30": 30}

# Kosek et al. (000_6647a8606a2226e0.txt §IV-D), the "HTML page with Javascript" (Wikipedia).
JS_PAGE_HTML_BYTES = 18_252
JS_PAGE_PNG_BYTES = (15_857, 2_039)
JS_PAGE_SVG_BYTES = 17_229
JS_PAGE_SCRIPT_BYTES = 614
SINGLE_PAGE_BYTES = 1_256  # example.org's index page

# Third-party zones by depth (depth 1 also uses first-party hosts of the page's own zone).
DEPTH_ZONES = {
    1: ["cdn-a.test", "cdn-b.test", "cdn-c.test"],
    2: ["tags.test", "fonts.test", "widgets.test", "social.test"],
    3: ["analytics.test", "ads.test", "pixel.test", "fontfiles.test"],
}
FIRST_PARTY_LABELS = ["static", "img", "media", "img2", "assets", "api", "img3", "video", "cdn", "s"]

WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "
         "et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip "
         "ex ea commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum fugiat nulla "
         "pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim "
         "id est laborum resolver query transport latency packet stream handshake").split()


@dataclass(frozen=True)
class Host:
    name: str  # FQDN without the trailing dot, e.g. www.multi-10.test
    zone: str  # the site zone it lives in, e.g. multi-10.test
    address: str
    page: str  # the page profile it belongs to
    depth: int  # 0 = the page's main host
    role: str  # main | first-party | cdn | tags | fonts | ... (the zone's first label)


@dataclass
class Page:
    profile: str
    main_host: str
    hosts: list[str]  # every hostname the page loads from, main host first
    depth: int  # longest chain of references below the HTML
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)  # host -> path -> bytes

    @property
    def url(self) -> str:
        return f"https://{self.main_host}/"

    def resources(self) -> list[str]:
        return [f"https://{h}{p}" for h, paths in self.files.items() for p in sorted(paths)]

    def total_bytes(self) -> int:
        return sum(len(b) for paths in self.files.values() for b in paths.values())


@dataclass
class SiteSet:
    seed: int
    pages: dict[str, Page]
    hosts: dict[str, Host]

    def zones(self) -> dict[str, dict[str, str]]:
        """{zone: {label: address}} for every site zone (labels relative to the zone)."""
        out: dict[str, dict[str, str]] = {}
        for h in self.hosts.values():
            label = h.name[: -len(h.zone) - 1]
            out.setdefault(h.zone, {})[label] = h.address
        return dict(sorted(out.items()))

    def digest(self) -> str:
        m = hashlib.sha256(str(self.seed).encode())
        for host in sorted(self.hosts):
            m.update(f"{host} {self.hosts[host].address}\n".encode())
        for prof in sorted(self.pages):
            for host, paths in sorted(self.pages[prof].files.items()):
                for p, data in sorted(paths.items()):
                    m.update(f"{host}{p} ".encode())
                    m.update(hashlib.sha256(data).digest())
        return m.hexdigest()

    def describe(self) -> dict[str, dict]:
        """Per page profile: URL, hostnames, depth, resource count and bytes (`testbed info`)."""
        return {
            prof: {"url": pg.url, "hosts": pg.hosts, "n_hosts": len(pg.hosts), "depth": pg.depth,
                   "resources": sum(len(p) for p in pg.files.values()), "bytes": pg.total_bytes()}
            for prof, pg in self.pages.items()
        }


# ---------------------------------------------------------------------------------------------
# content makers (exact sizes)
# ---------------------------------------------------------------------------------------------


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def make_png(rng: random.Random, size: int, width: int = 32, height: int = 32) -> bytes:
    """A valid RGB PNG of exactly ``size`` bytes (pixels from ``rng``, padded by a tEXt chunk)."""
    raw = b"".join(b"\x00" + bytes(rng.getrandbits(8) for _ in range(width * 3)) for _ in range(height))
    sig = b"\x89PNG\r\n\x1a\n"
    ihdr = _png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    idat = _png_chunk(b"IDAT", zlib.compress(raw, 9))
    iend = _png_chunk(b"IEND", b"")
    base = len(sig) + len(ihdr) + len(idat) + len(iend)
    if base + 12 + 8 > size:
        if width <= 2:
            raise ValueError(f"PNG of {size} bytes is too small")
        return make_png(rng, size, max(1, width // 2), max(1, height // 2))
    pad = size - base - 12
    text = b"Comment\x00" + bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz ") for _ in range(pad - 8))
    out = sig + ihdr + idat + _png_chunk(b"tEXt", text) + iend
    assert len(out) == size
    return out


def _pad_to(head: str, tail: str, size: int, filler: str) -> bytes:
    """``head + filler[:k] + tail`` of exactly ``size`` bytes (ASCII)."""
    need = size - len(head.encode()) - len(tail.encode())
    if need < 0:
        raise ValueError(f"content does not fit in {size} bytes ({size - need} needed)")
    reps = filler * (need // max(1, len(filler)) + 1)
    return (head + reps[:need] + tail).encode()


def make_svg_sprite(rng: random.Random, size: int) -> bytes:
    head = '<svg xmlns="http://www.w3.org/2000/svg" style="display:none">\n'
    symbols = []
    body = ""
    i = 0
    while len(head) + len(body) + 400 < size:
        pts = " ".join(f"{rng.randint(0, 24)},{rng.randint(0, 24)}" for _ in range(8))
        sym = f'<symbol id="icon-{i}" viewBox="0 0 24 24"><path d="M{pts}Z"/></symbol>\n'
        symbols.append(sym)
        body += sym
        i += 1
    return _pad_to(head + body + "<!-- ", " -->\n</svg>\n", size, "sprite ")


def make_js(rng: random.Random, size: int, code: str = "") -> bytes:
    head = f"/* dnscamp testbed script {rng.getrandbits(32):08x} */\n{code}\n/*"
    return _pad_to(head, "*/\n", size, " " + _text(rng, 40))


def make_css(rng: random.Random, size: int, extra: str = "") -> bytes:
    rules = []
    for i in range(max(1, size // 400)):
        rules.append(f".c{rng.getrandbits(24):06x}-{i}{{margin:{rng.randint(0, 20)}px;color:#{rng.getrandbits(24):06x}}}")
    head = extra + "\n" + "\n".join(rules)
    head = head[: max(0, size - 200)]
    head = head[: head.rfind("}") + 1] if "}" in head else ""
    return _pad_to(head + "\n/*", "*/\n", size, " " + _text(rng, 30))


def make_html(rng: random.Random, size: int, title: str, head_extra: str, body: str) -> bytes:
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n<title>{title}</title>\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n{head_extra}</head>\n<body>\n'
            f"{body}\n<!--")
    return _pad_to(head, "-->\n</body></html>\n", size, " " + _text(rng, 50))


def _paragraphs(rng: random.Random, n_bytes: int) -> str:
    out, total = [], 0
    while total < n_bytes:
        p = f"<p>{_text(rng, rng.randint(40, 90))}</p>"
        out.append(p)
        total += len(p) + 1
    return "\n".join(out)


def _loader_js(children: list[tuple[str, str]]) -> str:
    """JS that injects each child (kind, url) into the document: scripts, style sheets and
    images appended before `load` delay the load event, as third-party tags do."""
    calls = []
    for kind, url in children:
        fn = {"script": "s", "style": "c", "image": "i"}[kind]
        calls.append(f"{fn}({json.dumps(url)});")
    return ("(function(){var d=document;"
            "function s(u){var e=d.createElement('script');e.src=u;d.head.appendChild(e)}"
            "function c(u){var e=d.createElement('link');e.rel='stylesheet';e.href=u;d.head.appendChild(e)}"
            "function i(u){var e=d.createElement('img');e.src=u;e.alt='';e.width=1;e.height=1;"
            "(d.body||d.documentElement).appendChild(e)}"
            + "".join(calls) + "})();")


# ---------------------------------------------------------------------------------------------
# pages
# ---------------------------------------------------------------------------------------------


class _Builder:
    def __init__(self, seed: int):
        self.seed = seed
        self.pages: dict[str, Page] = {}
        self.host_rows: list[tuple[str, str, str, int, str]] = []  # name, zone, page, depth, role

    def rng(self, *tag: object) -> random.Random:
        h = hashlib.sha256(("|".join(map(str, (self.seed, *tag)))).encode()).digest()
        return random.Random(int.from_bytes(h[:8], "big"))

    def host(self, name: str, zone: str, page: str, depth: int, role: str) -> str:
        self.host_rows.append((name, zone, page, depth, role))
        return name

    # -- single ---------------------------------------------------------------------------------
    def single(self) -> None:
        rng = self.rng("single")
        main = self.host("www.single.test", "single.test", "single", 0, "main")
        body = ("<div>\n<h1>Single page</h1>\n<p>This domain is for use in dnscamp testbed measurements: one "
                "HTML document and nothing else, like example.org.</p>\n</div>")
        style = '<style>body{background:#f0f0f2;margin:0;font-family:sans-serif}div{width:600px;margin:5em auto}</style>\n'
        html = make_html(rng, SINGLE_PAGE_BYTES, "Single page", style, body)
        self.pages["single"] = Page("single", main, [main], 0, {main: {"/": html}})

    # -- js (Kosek et al. §IV-D) ----------------------------------------------------------------
    def js(self) -> None:
        rng = self.rng("js")
        main = self.host("www.js.test", "js.test", "js", 0, "main")
        files: dict[str, bytes] = {}
        files["/static/logo.png"] = make_png(rng, JS_PAGE_PNG_BYTES[0], 64, 64)
        files["/static/wordmark.png"] = make_png(rng, JS_PAGE_PNG_BYTES[1], 16, 16)
        files["/static/sprite.svg"] = make_svg_sprite(rng, JS_PAGE_SVG_BYTES)
        files["/static/startup.js"] = make_js(
            rng, JS_PAGE_SCRIPT_BYTES, "document.documentElement.className+=' js';")
        head = '<script src="/static/startup.js"></script>\n'
        body = ('<header><img src="/static/logo.png" alt="logo" width="64" height="64">'
                '<img src="/static/wordmark.png" alt="wordmark" width="16" height="16">'
                '<img src="/static/sprite.svg" alt="" width="1" height="1"></header>\n'
                '<main><h1>Article</h1>\n' + _paragraphs(rng, 12_000) + "</main>")
        files["/"] = make_html(rng, JS_PAGE_HTML_BYTES, "Article (HTML page with Javascript)", head, body)
        self.pages["js"] = Page("js", main, [main], 1, {main: files})

    # -- js-css ---------------------------------------------------------------------------------
    def js_css(self) -> None:
        rng = self.rng("js-css")
        main = self.host("www.js-css.test", "js-css.test", "js-css", 0, "main")
        files: dict[str, bytes] = {}
        head, body = [], []
        for i, lo_hi in enumerate([(8_000, 16_000), (20_000, 40_000)]):
            p = f"/css/style{i}.css"
            extra = ("#cookie-banner{position:fixed;bottom:0;left:0;right:0;padding:1em;background:#222;color:#fff}"
                     "#cookie-banner.hidden{display:none}") if i == 0 else ""
            files[p] = make_css(rng, rng.randint(*lo_hi), extra)
            head.append(f'<link rel="stylesheet" href="{p}">')
        sizes = [(1_000, 3_000), (3_000, 8_000), (5_000, 15_000), (10_000, 30_000), (20_000, 50_000),
                 (30_000, 80_000), (60_000, 120_000)]
        for i, lo_hi in enumerate(sizes):
            p = f"/js/app{i}.js"
            code = ""
            if i == 0:  # the cookie banner: shown by script, dismissed by a click
                code = ("document.addEventListener('DOMContentLoaded',function(){var b=document.getElementById("
                        "'cookie-banner');if(b){b.className='';b.querySelector('button').onclick=function(){"
                        "b.className='hidden'}}});")
            files[p] = make_js(rng, rng.randint(*lo_hi), code)
            attr = " defer" if i >= 3 else ""
            head.append(f'<script src="{p}"{attr}></script>')
        imgs = []
        for i in range(4):
            p = f"/img/photo{i}.png"
            files[p] = make_png(rng, rng.randint(6_000, 40_000), 48, 48)
            imgs.append(f'<img src="{p}" alt="photo {i}" width="48" height="48">')
        body.append('<div id="cookie-banner" class="hidden">This site uses cookies. <button>OK</button></div>')
        body.append("<nav>" + " ".join(imgs[:1]) + "</nav><main><h1>News</h1>")
        body.append(_paragraphs(rng, 9_000) + " ".join(imgs[1:]) + _paragraphs(rng, 9_000) + "</main>")
        files["/"] = make_html(rng, rng.randint(30_000, 40_000), "News (HTML, JS and CSS)",
                               "\n".join(head) + "\n", "\n".join(body))
        self.pages["js-css"] = Page("js-css", main, [main], 1, {main: files})

    # -- multi-host -----------------------------------------------------------------------------
    def multi(self, profile: str, n: int) -> None:
        rng = self.rng(profile)
        zone = f"{profile}.test"
        main = self.host(f"www.{zone}", zone, profile, 0, "main")
        rest = n - 1
        d3 = max(1, round(rest * 0.2))
        d2 = max(1, round(rest * 0.3))
        d1 = rest - d2 - d3
        tag = f"m{n}"
        by_depth: dict[int, list[str]] = {0: [main], 1: [], 2: [], 3: []}
        n_first = max(1, d1 // 3)
        for i in range(d1):
            if i < n_first:
                name = self.host(f"{FIRST_PARTY_LABELS[i % len(FIRST_PARTY_LABELS)]}.{zone}", zone, profile, 1,
                                 "first-party")
            else:
                k = i - n_first
                z = DEPTH_ZONES[1][k % len(DEPTH_ZONES[1])]
                idx = k // len(DEPTH_ZONES[1])
                name = self.host(f"{tag}{'-' + str(idx) if idx else ''}.{z}", z, profile, 1, z.split(".")[0])
            by_depth[1].append(name)
        for d, count in ((2, d2), (3, d3)):
            for k in range(count):
                z = DEPTH_ZONES[d][k % len(DEPTH_ZONES[d])]
                idx = k // len(DEPTH_ZONES[d])
                by_depth[d].append(self.host(f"{tag}{'-' + str(idx) if idx else ''}.{z}", z, profile, d,
                                             z.split(".")[0]))
        # parents: depth-d host j hangs below depth-(d-1) host j mod count (depth 1: the HTML);
        # the depth-1 parents are the third-party ones first (cdn scripts load tags), then first-party.
        parents: dict[str, str] = {}
        for d in (2, 3):
            ups = by_depth[d - 1]
            if d == 2:
                ups = [h for h in ups if not h.endswith(zone)] + [h for h in ups if h.endswith(zone)]
            for j, h in enumerate(by_depth[d]):
                parents[h] = ups[j % len(ups)]
        children: dict[str, list[str]] = {}
        for h, p in parents.items():
            children.setdefault(p, []).append(h)
        files: dict[str, dict[str, bytes]] = {h: {} for d in by_depth.values() for h in d}
        # Resource(s) of each non-main host; a host with children serves a loader script.
        entry: dict[str, tuple[str, str]] = {}  # host -> (kind, url) by which its parent loads it

        def leaf_kind(h: str) -> str:
            return rng.choice(["image", "image", "script", "style"])

        for d in (3, 2, 1):
            for h in by_depth[d]:
                kids = children.get(h, [])
                if kids:
                    code = _loader_js([entry[k] for k in kids])
                    files[h]["/loader.js"] = make_js(rng, rng.randint(2_000, 12_000) + len(code), code)
                    entry[h] = ("script", f"https://{h}/loader.js")
                else:
                    kind = leaf_kind(h)
                    if kind == "image":
                        files[h]["/pixel.png"] = make_png(rng, rng.randint(600, 20_000), 16, 16)
                        entry[h] = ("image", f"https://{h}/pixel.png")
                    elif kind == "script":
                        files[h]["/lib.js"] = make_js(rng, rng.randint(2_000, 30_000))
                        entry[h] = ("script", f"https://{h}/lib.js")
                    else:
                        files[h]["/style.css"] = make_css(rng, rng.randint(2_000, 12_000))
                        entry[h] = ("style", f"https://{h}/style.css")
        # The HTML references every depth-1 host (plus one first-party image per first-party host).
        head, body = [], []
        for h in by_depth[1]:
            kind, url = entry[h]
            if kind == "script":
                head.append(f'<script src="{url}" defer></script>')
            elif kind == "style":
                head.append(f'<link rel="stylesheet" href="{url}">')
            else:
                body.append(f'<img src="{url}" alt="" width="16" height="16">')
            if h.endswith("." + zone) and kind != "image":
                files[h]["/banner.png"] = make_png(rng, rng.randint(4_000, 30_000), 32, 32)
                body.append(f'<img src="https://{h}/banner.png" alt="" width="32" height="32">')
        main_body = f"<main><h1>Page on {n} hostnames</h1>\n" + _paragraphs(rng, 6_000) + "\n" + "\n".join(body) + "</main>"
        files[main]["/"] = make_html(rng, rng.randint(20_000, 40_000) + 150 * n, f"Page on {n} hostnames",
                                     "\n".join(head) + "\n", main_body)
        depth = max(d for d, hs in by_depth.items() if hs)
        hosts = [h for d in (0, 1, 2, 3) for h in by_depth[d]]
        assert len(hosts) == n == len(set(hosts)), (profile, hosts)
        self.pages[profile] = Page(profile, main, hosts, depth, files)

    def build(self) -> SiteSet:
        self.single()
        self.js()
        self.js_css()
        for prof, n in MULTI_SIZES.items():
            self.multi(prof, n)
        net = ipaddress.ip_network(plan.WEB_SUBNET)
        hosts: dict[str, Host] = {}
        # Addresses: 10.80.1.1, 10.80.1.2, ... in page order (10.80.0.0/24 is left to dc-web itself).
        for i, (name, zone, page, depth, role) in enumerate(self.host_rows):
            if name in hosts:
                raise ValueError(f"hostname {name} generated twice")
            addr = net.network_address + 256 * (1 + i // 250) + 1 + i % 250
            hosts[name] = Host(name, zone, str(addr), page, depth, role)
        return SiteSet(self.seed, {p: self.pages[p] for p in PROFILES}, hosts)


def generate(seed: int = DEFAULT_SEED) -> SiteSet:
    """Every page, hostname, address and file for ``seed`` (pure; same seed, same bytes)."""
    return _Builder(seed).build()


def write(sites: SiteSet, root: Path) -> bool:
    """Write the document roots to ``root/<host>/...``. Skipped (returns False) when the
    manifest on disk already has this site set's digest."""
    root = Path(root)
    manifest = root / "manifest.json"
    digest = sites.digest()
    try:
        if json.loads(manifest.read_text()).get("digest") == digest:
            return False
    except (OSError, ValueError):
        pass
    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for page in sites.pages.values():
        for host, paths in page.files.items():
            for p, data in paths.items():
                rel = "index.html" if p == "/" else p.lstrip("/")
                f = tmp / host / rel
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_bytes(data)
    (tmp / "manifest.json").write_text(json.dumps({"seed": sites.seed, "digest": digest,
                                                   "pages": sites.describe()}, indent=1))
    if root.exists():
        shutil.rmtree(root)
    os.replace(tmp, root)
    return True
