"""The seeded site generator (testbed/services/sites.py): determinism, the page profiles'
shapes and exact sizes from the papers, valid content, addresses and zones."""

from __future__ import annotations

import ipaddress
import re
import struct
import zlib

import pytest

from testbed import plan
from testbed.services import dns_hierarchy, sites

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def gen():
    return sites.generate()


def test_same_seed_same_bytes_other_seed_other_bytes(gen):
    again = sites.generate()
    assert again.digest() == gen.digest()
    for prof in gen.pages:
        assert again.pages[prof].files == gen.pages[prof].files
    assert sites.generate(2).digest() != gen.digest()


def test_profiles_and_host_counts(gen):
    assert list(gen.pages) == sites.PROFILES
    for prof in ("single", "js", "js-css"):
        assert len(gen.pages[prof].hosts) == 1
    for prof, n in sites.MULTI_SIZES.items():
        page = gen.pages[prof]
        assert len(page.hosts) == n == len(set(page.hosts))
        assert page.depth == 3
        assert page.hosts[0] == f"www.{prof}.test"
        roles = {gen.hosts[h].role for h in page.hosts}
        assert {"cdn-a", "tags", "analytics"} <= roles


def test_js_page_has_the_exact_sizes_of_kosek_iv_d(gen):
    files = gen.pages["js"].files["www.js.test"]
    sizes = sorted(len(b) for b in files.values())
    # 000_6647a8606a2226e0.txt §IV-D: HTML 18,252 B, PNGs 15,857 and 2,039 B, SVG 17,229 B, JS 614 B
    assert sizes == sorted([18_252, 15_857, 2_039, 17_229, 614])
    assert len(files["/"]) == sites.JS_PAGE_HTML_BYTES
    assert sum(p.endswith(".png") for p in files) == 2 and sum(p.endswith(".svg") for p in files) == 1
    assert sum(p.endswith(".js") for p in files) == 1


def test_js_css_page(gen):
    files = gen.pages["js-css"].files["www.js-css.test"]
    assert sum(p.endswith(".js") for p in files) == 7
    assert sum(p.endswith(".css") for p in files) == 2
    assert sum(p.endswith(".png") for p in files) >= 2
    assert b'id="cookie-banner"' in files["/"]


def test_single_page_is_small(gen):
    page = gen.pages["single"]
    assert page.resources() == ["https://www.single.test/"]
    assert len(page.files["www.single.test"]["/"]) == sites.SINGLE_PAGE_BYTES


def _png_ok(data: bytes) -> bool:
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    i = 8
    kinds = []
    while i < len(data):
        n = struct.unpack(">I", data[i:i + 4])[0]
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        crc = struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0]
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            return False
        kinds.append(kind)
        i += 12 + n
    return kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds


def test_content_is_valid(gen):
    for page in gen.pages.values():
        for host, paths in page.files.items():
            for p, data in paths.items():
                if p.endswith(".png"):
                    assert _png_ok(data), (host, p)
                elif p == "/":
                    assert data.startswith(b"<!DOCTYPE html>") and data.rstrip().endswith(b"</html>")
                elif p.endswith(".svg"):
                    assert data.startswith(b"<svg") and data.rstrip().endswith(b"</svg>")
                data.decode("utf-8") if not p.endswith(".png") else None


def test_every_referenced_host_belongs_to_the_page_and_depth_chain(gen):
    for prof, page in gen.pages.items():
        for host, paths in page.files.items():
            for data in paths.values():
                if b"https://" not in data:
                    continue
                for ref in re.findall(rb"https://([a-z0-9.-]+\.test)/", data):
                    ref = ref.decode()
                    assert ref in page.hosts, (prof, host, ref)
                    assert gen.hosts[ref].depth in (gen.hosts[host].depth + 1, gen.hosts[host].depth), (host, ref)
        # every host of the page is referenced by someone (or is the main host)
        refd = {r.decode() for paths in page.files.values() for d in paths.values()
                for r in re.findall(rb"https://([a-z0-9.-]+\.test)/", d)}
        assert set(page.hosts) - refd <= {page.main_host}, prof


def test_distinct_addresses_in_the_web_subnet(gen):
    net = ipaddress.ip_network(plan.WEB_SUBNET)
    addrs = [h.address for h in gen.hosts.values()]
    assert len(addrs) == len(set(addrs))
    for a in addrs:
        ip = ipaddress.ip_address(a)
        assert ip in net and ip != net.network_address + 1  # 10.80.0.1 is dc-web's own


def test_zone_files_come_from_the_site_list(gen, tmp_path):
    files = dns_hierarchy.write_zones(gen, tmp_path)
    tld = files["test"].read_text()
    for zone in gen.zones():
        assert f"{zone}. 3600 IN NS ns.{zone}." in tld
        assert f"ns.{zone}. 3600 IN A {plan.SITES_AUTH_SERVER}" in tld
    for host in gen.hosts.values():
        assert f"{host.name}. 3600 IN A {host.address}" in files[host.zone].read_text()
    root = files["."].read_text()
    assert f"test. 3600 IN NS {dns_hierarchy.TLD_NS}." in root and "whoami" not in root
    assert "whoami.test. 3600 IN NS ns.whoami.test." in tld


def test_write_is_skipped_when_unchanged(gen, tmp_path):
    root = tmp_path / "sites"
    assert sites.write(gen, root) is True
    assert (root / "www.js.test" / "index.html").stat().st_size == sites.JS_PAGE_HTML_BYTES
    assert sites.write(gen, root) is False
