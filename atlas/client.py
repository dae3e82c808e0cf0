"""Talking to RIPE Atlas: submit, fetch (retry + backoff on 429 / 5xx), stream (reconnects).

The retry and reconnect policies are sans-I/O (`Backoff.delay(attempt, status, retry_after)`)
and tested with a fake clock; the drivers below use ripe.atlas.cousteau for HTTP and its
AtlasStream for the result stream. The API key is sent only in the Authorization header by
cousteau; nothing here logs it (errors pass through ``key.redact``).

Streaming: cousteau 2.3's ``AtlasStream.connect`` retries forever without a bound and its
``iter`` keeps reading a dead socket after a disconnect (the failure reported as
ripe-atlas-cousteau issue #43: a dropped stream is not resumed). ``stream_results`` owns the
loop instead: on any error it closes the socket, waits per the policy, connects again and
resubscribes every measurement, until its deadline.
"""

from __future__ import annotations

import logging
import random
import select
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from ripe.atlas.cousteau import AtlasCreateRequest, AtlasResultsRequest, AtlasStream

from atlas.key import ApiKey, redact

LOG = logging.getLogger("dnscamp.atlas")
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class AtlasApiError(Exception):
    """The API said no (or never answered after all retries); message has no key in it."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter, capped; honours Retry-After. Pure."""

    base_s: float = 1.0
    factor: float = 2.0
    max_delay_s: float = 60.0
    max_attempts: int = 6
    jitter: bool = True
    retry_statuses: frozenset = RETRY_STATUSES
    retry_no_answer: bool = True

    def should_retry(self, status: int | None) -> bool:
        """status None = no HTTP answer at all (connection error)."""
        return self.retry_no_answer if status is None else status in self.retry_statuses

    def delay(self, attempt: int, status: int | None, retry_after: float | None = None,
              rng: random.Random | None = None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` (attempt counts from 1), or None = give up."""
        if attempt >= self.max_attempts or not self.should_retry(status):
            return None
        cap = min(self.max_delay_s, self.base_s * self.factor ** (attempt - 1))
        d = (rng or random).uniform(cap / 2, cap) if self.jitter else cap
        if retry_after is not None:
            d = max(d, min(float(retry_after), self.max_delay_s))
        return d


def _retry_after(headers: Any) -> float | None:
    try:
        v = headers.get("Retry-After") if headers is not None else None
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def call_with_retry(make_request: Callable[[], Any], call: Callable[[Any], tuple[bool, Any]], *,
                    policy: Backoff = Backoff(), sleep: Callable[[float], None] = time.sleep,
                    key: ApiKey | None = None, what: str = "request") -> Any:
    """Run a cousteau request, retrying per ``policy``. The HTTP status is captured by wrapping
    the request's ``get_http_method`` (cousteau returns only (ok, body))."""
    attempt = 0
    while True:
        attempt += 1
        req = make_request()
        seen: dict[str, Any] = {"status": None, "headers": None}
        orig = req.get_http_method

        def capture(method, _orig=orig, _seen=seen):
            resp = _orig(method)
            _seen["status"], _seen["headers"] = resp.status_code, resp.headers
            return resp

        req.get_http_method = capture
        ok, body = call(req)
        status = seen["status"]
        if ok:
            return body
        d = policy.delay(attempt, status, _retry_after(seen["headers"]))
        msg = redact(f"{what}: HTTP {status if status is not None else 'no answer'}: {str(body)[:300]}", key)
        if d is None:
            raise AtlasApiError(f"{msg} (after {attempt} attempt(s))", status)
        LOG.warning("%s; retrying in %.1f s", msg, d)
        sleep(d)


def submit(plan, key: ApiKey, *, server: str | None = None, verify: Any = True, policy: Backoff = Backoff(),
           sleep: Callable[[float], None] = time.sleep) -> list[dict[str, Any]]:
    """Create every request of ``plan`` (or a list of ApiRequest). Returns [{role, msm_ids}] per definition."""
    requests_ = plan.requests if hasattr(plan, "requests") else list(plan)
    out: list[dict[str, Any]] = []
    for r in requests_:
        def make(r=r):
            return AtlasCreateRequest(server=server, key=key.reveal(), verify=verify, measurements=list(r.measurements),
                                      sources=list(r.sources), is_oneoff=r.is_oneoff, bill_to=r.bill_to)

        # POST is not idempotent: retry only when the API clearly did not create anything (429/503),
        # never after a lost answer (the measurement may exist: look before submitting again).
        post_policy = Backoff(policy.base_s, policy.factor, policy.max_delay_s, policy.max_attempts, policy.jitter,
                              retry_statuses=frozenset({429, 503}), retry_no_answer=False)
        body = call_with_retry(make, lambda req: req.create(), policy=post_policy, sleep=sleep, key=key,
                               what="create measurement")
        ids = list(body.get("measurements", [])) if isinstance(body, dict) else []
        if len(ids) != len(r.roles):
            raise AtlasApiError(f"create measurement: expected {len(r.roles)} ids, got {ids!r}")
        for role, msm in zip(r.roles, ids):
            out.append({"role": role, "msm_ids": [int(msm)], "target": None})
    return out


def fetch_results(msm_id: int, *, key: ApiKey | None = None, server: str | None = None, verify: Any = True,
                  start: int | None = None, stop: int | None = None, probe_ids: list[int] | None = None,
                  policy: Backoff = Backoff(), sleep: Callable[[float], None] = time.sleep) -> list[dict]:
    kw: dict[str, Any] = {"msm_id": msm_id, "server": server, "verify": verify}
    if key is not None:
        kw["key"] = key.reveal()
    if start is not None:
        kw["start"] = start
    if stop is not None:
        kw["stop"] = stop
    if probe_ids:
        kw["probe_ids"] = probe_ids
    body = call_with_retry(lambda: AtlasResultsRequest(**kw), lambda req: req.create(), policy=policy,
                           sleep=sleep, key=key, what=f"results of {msm_id}")
    if not isinstance(body, list):
        raise AtlasApiError(f"results of {msm_id}: expected a JSON array, got {type(body).__name__}")
    return body


@dataclass
class StreamStats:
    connects: int = 0
    subscriptions_sent: int = 0
    results: int = 0
    errors: int = 0


def stream_results(msm_ids: Iterable[int], *, seconds: float, base_url: str = "https://atlas-stream.ripe.net",
                   policy: Backoff = Backoff(base_s=0.5, max_delay_s=30, max_attempts=10**9),
                   clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                   stats: StreamStats | None = None, connect_timeout: float = 10.0,
                   stream_factory: Callable[..., AtlasStream] = AtlasStream) -> Iterator[dict]:
    """Yield Atlas results of ``msm_ids`` for ``seconds``; reconnect + resubscribe on any drop."""
    import websocket

    stats = stats if stats is not None else StreamStats()
    stream = stream_factory(base_url=base_url)
    for m in msm_ids:
        stream.subscribe(AtlasStream.STREAM_TYPE_RESULT, msm=int(m))  # remembered, sent on each connect
    deadline = clock() + seconds
    failures = 0
    seen: set[tuple] = set()
    while clock() < deadline:
        ws = None
        try:
            ws = websocket.create_connection(stream.url, header=stream.headers,
                                             timeout=min(connect_timeout, max(0.1, deadline - clock())))
            stats.connects += 1
            for sub in stream.subscriptions:
                stream.send(ws, AtlasStream.EVENT_NAME_SUBSCRIBE, sub)
                stats.subscriptions_sent += 1
            failures = 0
            while True:
                remaining = deadline - clock()
                if remaining <= 0:
                    return
                ready, _, _ = select.select([ws.sock], [], [], remaining)
                if not ready:
                    return
                event, payload = stream.recv(ws)
                if event == AtlasStream.EVENT_NAME_RESULTS and isinstance(payload, dict):
                    k = (payload.get("msm_id"), payload.get("prb_id"), payload.get("timestamp"), payload.get("type"))
                    if k in seen:  # a resubscription may replay what we already had
                        continue
                    seen.add(k)
                    stats.results += 1
                    yield payload
                elif event == AtlasStream.EVENT_NAME_ERROR:
                    LOG.warning("atlas stream error event: %s", str(payload)[:200])
        except Exception as exc:  # noqa: BLE001 - any failure of the stream means: reconnect
            stats.errors += 1
            failures += 1
            LOG.info("atlas stream dropped (%s); reconnecting", type(exc).__name__)
        finally:
            if ws is not None:
                try:
                    ws.close()
                except Exception:  # noqa: BLE001
                    pass
        d = policy.delay(1 if failures <= 1 else failures, None) or policy.max_delay_s
        d = min(d, max(0.0, deadline - clock()))
        if d > 0:
            sleep(d)
