"""Page loads per hour with a clean state per load (throughput targets: >= 900/h for
Chromium, >= 600/h for Firefox on this 2-core machine; browsertime manages ~300/h at ~12 s
per iteration).

Each load is the full engine path (vantage_agent.pageload.kind.measure): fresh browser and
profile, DNS mode in force, timings collected, HAR built + validated + written, browser quit.
loads/h = 3600 / (wall time of the whole series / loads).

    # on the testbed: the `js` page from the fiber client
    bench/pageload_throughput.py --netns dc-client-fiber --url https://js.site.test/ --dns system
    # anywhere: the loopback site of tests/scaffolding/localsite.py
    bench/pageload_throughput.py --loads 20

Also measures the doq/doh3 stub's added latency per query when CoreDNS is built
(``--stub``). The last line of output is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.scaffolding import localsite  # noqa: E402
from vantage_agent.dns import catalog  # noqa: E402
from vantage_agent.kind import Unit  # noqa: E402
from vantage_agent.pageload import dnsmode  # noqa: E402
from vantage_agent.pageload.common import LoadOptions  # noqa: E402
from vantage_agent.pageload.kind import find_ca, measure  # noqa: E402
from vantage_agent.records import Vantage  # noqa: E402
from vantage_agent.stats import median  # noqa: E402


def series(browser: str, url: str, mode: dnsmode.DnsMode, n: int, ca: str | None, work: Path) -> dict:
    unit = Unit(id="bench", campaign="bench", run="bench", kind="page_load", vantage=Vantage(id="bench", provider="local"),
                target=url, repetition=0, params={}, seed=1)  # fmt: skip
    opts = LoadOptions(ca_file=ca, work_dir=str(work / "work"), timeout_s=30)
    statuses: dict[str, int] = {}
    plts, walls = [], []
    with dnsmode.setup(mode, work / f"dns-{browser}", ca_file=ca) as ds:
        # one warm-up load (page cache of the binaries), not counted
        measure(unit, url, browser, mode, opts, work, dns=ds, rtt_count=None)
        t0 = time.monotonic()
        for _ in range(n):
            t = time.monotonic()
            rec = measure(unit, url, browser, mode, opts, work, dns=ds, rtt_count=None)
            walls.append((time.monotonic() - t) * 1000)
            statuses[rec.status] = statuses.get(rec.status, 0) + 1
            if rec.body.get("plt_ms") is not None:
                plts.append(rec.body["plt_ms"])
        total = time.monotonic() - t0
    return {
        "browser": browser,
        "loads": n,
        "statuses": statuses,
        "loads_per_hour": round(3600 * n / total, 1),
        "wall_ms_per_load_p50": round(median(walls), 1),
        "plt_ms_p50": round(median(plts), 1) if plts else None,
    }


def stub_overhead(n: int) -> dict | None:
    from vantage_agent.pageload import stub
    from vantage_agent.paths import bin_dir

    import dns.message
    import dns.query

    coredns = bin_dir() / "coredns-1.15.0"
    if not coredns.exists():
        return None
    out = {}
    with tempfile.TemporaryDirectory() as d:
        site = localsite.LocalSite.start(Path(d) / "site")
        ip = dnsmode.free_loopback()
        conf = Path(d) / "Corefile"
        conf.write_text("".join(
            f"{s}://.:{p} {{\n  bind {ip}\n  tls {site.cert} {site.key}\n  forward . {site.ip}:53\n}}\n"
            for s, p in (("quic", 853), ("https3", 443))
        ))  # fmt: skip
        p = subprocess.Popen([str(coredns), "-conf", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            for t in [m.name for m in dnsmode.MODES.values() if m.via_stub]:
                r = dnsmode.parse(f"{t}:dns.test@{ip}").resolver
                listen = dnsmode.free_loopback()
                s = stub.Stub.start(listen, 53, t, r, ca_file=str(site.ca))
                try:
                    for i in range(n):
                        dns.query.udp(dns.message.make_query(f"h{i % 5}.site.test", "A"), listen, timeout=5)
                    st = s.stats()
                finally:
                    s.close()
                out[t] = {k: st[k] for k in ("queries", "failures", "overhead_us_p50", "overhead_us_p90", "upstream_us_p50")}
        finally:
            p.terminate()
            p.wait(10)
            site.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--browsers", default="chromium,firefox")
    ap.add_argument("--loads", type=int, default=20)
    ap.add_argument("--url", help="page to load (default: the loopback site's /js page)")
    ap.add_argument("--dns", default=None, help="DNS mode (default: do53 to the loopback site's resolver)")
    ap.add_argument("--netns", help="re-run inside this namespace (e.g. dc-client-fiber)")
    ap.add_argument("--stub", type=int, default=500, help="stub overhead: queries per transport (0: skip)")
    a = ap.parse_args()
    if a.netns and os.environ.get("DNSCAMP_NETNS") != a.netns:
        argv = ["ip", "netns", "exec", a.netns, "env", f"DNSCAMP_NETNS={a.netns}", sys.executable, *sys.argv]
        return subprocess.call(argv)
    results = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        site = None
        if a.url:
            tb = catalog.testbed_info()  # the testbed's CA and resolvers (None off the testbed)
            url, ca = a.url, find_ca(None, tb)
            mode = dnsmode.parse(a.dns or "system", testbed=tb)
        else:
            site = localsite.LocalSite.start(work / "site")
            url, ca = site.url("js"), str(site.ca)
            mode = dnsmode.parse(a.dns or f"do53:{site.resolver('do53')}")
        try:
            for b in a.browsers.split(","):
                r = series(b, url, mode, a.loads, ca, work)
                print(f"{b}: {r['loads_per_hour']} loads/h ({r['wall_ms_per_load_p50']} ms per load, PLT p50 {r['plt_ms_p50']} ms, {r['statuses']})")
                results.append(r)
        finally:
            if site:
                site.close()
    stub = stub_overhead(a.stub) if a.stub else None
    if stub:
        for t, s in stub.items():
            print(f"stub {t}: overhead p50 {s['overhead_us_p50']:.0f} us, p90 {s['overhead_us_p90']:.0f} us over {s['queries']} queries")
    print(json.dumps({
        "bench": "pageload_throughput", "url": url, "dns": str(mode), "netns": os.environ.get("DNSCAMP_NETNS"),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "load1": os.getloadavg()[0]},
        "results": results, "stub": stub,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
