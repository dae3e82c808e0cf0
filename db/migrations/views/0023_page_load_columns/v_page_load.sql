-- page_load records: one row per browser load. Durations derived here from the
-- Navigation Timing phase timestamps (ms since navigation start); the raw entry, the HAR path
-- and the per-resource timings stay available as JSON.
-- Never an error on stored data: values are read with JSON_VALUE (NULL for a value of another
-- JSON type or out of the column's range: the navigation entry and the stub summary are
-- free-form JSON), and the phase differences are computed by the JSON path in numeric.
-- Storage (docs/store.md): generic_results rows (the body as jsonb) and their context,
-- LEFT JOINed on primary keys (every id exists): a query not reading the seed skips environments.
-- warm_origin (0016): false, never NULL, for a cold load, whether its body has no warm_origin
-- key (records before warm loads) or warm_origin: null; request_in_0rtt is NULL for a cold
-- load and for a warm one whose netlog had no QUIC session to the origin (h2).
-- url, browser, dns_mode, dns_transport and plt_ms (0023) are generic_results' stored columns
-- pl_*: the same expressions on the body, computed when the row is written (a query grouping
-- or pairing loads reads them without parsing the body).
CREATE OR REPLACE VIEW v_page_load AS
SELECT r.id, c.campaign, c.run, r.unit, c.vantage_id, c.provider, c.region, c.network_profile,
       r.started_at, r.status, r.error,
       r.pl_url AS url,
       r.body ->> 'final_url' AS final_url,
       r.pl_browser AS browser,
       r.body ->> 'browser_version' AS browser_version,
       r.body ->> 'driver_version' AS driver_version,
       r.pl_dns_mode AS dns_mode,
       r.pl_dns_transport AS dns_transport,
       r.body ->> 'resolver' AS resolver,
       r.body ->> 'http' AS http,
       JSON_VALUE(r.body, '$.timeout_s' RETURNING float8) AS timeout_s,
       r.pl_plt_ms AS plt_ms,
       JSON_VALUE(r.body, '$.navigation.domContentLoadedEventStart' RETURNING float8) AS dom_content_loaded_ms,
       JSON_VALUE(r.body, '$.navigation.responseStart' RETURNING float8) AS ttfb_ms,
       JSON_VALUE(r.body, '$.navigation.domainLookupEnd - $.navigation.domainLookupStart' RETURNING float8) AS doc_dns_ms,
       JSON_VALUE(r.body, '$.navigation.connectEnd - $.navigation.connectStart' RETURNING float8) AS doc_connect_ms,
       CASE WHEN JSON_VALUE(r.body, '$.navigation.secureConnectionStart' RETURNING float8) > 0
            THEN JSON_VALUE(r.body, '$.navigation.connectEnd - $.navigation.secureConnectionStart' RETURNING float8)
       END AS doc_tls_ms,
       JSON_VALUE(r.body, '$.first_paint_ms' RETURNING float8) AS first_paint_ms,
       JSON_VALUE(r.body, '$.first_contentful_paint_ms' RETURNING float8) AS first_contentful_paint_ms,
       JSON_VALUE(r.body, '$.lcp_ms' RETURNING float8) AS lcp_ms,
       r.body ->> 'next_hop_protocol' AS next_hop_protocol,
       JSON_VALUE(r.body, '$.unique_hostnames' RETURNING int) AS unique_hostnames,
       JSON_VALUE(r.body, '$.dns_lookups' RETURNING int) AS dns_lookups,
       COALESCE(JSON_VALUE(r.body, '$.resources.size()' RETURNING int), 0) AS resources,
       JSON_VALUE(r.body, '$.dns_transport_verified' RETURNING boolean) AS dns_transport_verified,
       JSON_VALUE(r.body, '$.stub.queries' RETURNING int) AS stub_queries,
       JSON_VALUE(r.body, '$.stub.overhead_us_p50' RETURNING float8) AS stub_overhead_us_p50,
       r.body ->> 'har_path' AS har_path,
       JSON_VALUE(r.body, '$.har_valid' RETURNING boolean) AS har_valid,
       r.body -> 'resolver_rtt_ms' AS resolver_rtt_ms,
       r.body -> 'hostnames' AS hostnames,
       r.body -> 'protocols' AS protocols,
       r.body -> 'order' AS load_order,
       e.envb ->> 'seed' AS seed,
       JSON_EXISTS(r.body, '$.warm_origin ? (@.type() == "object")') AS warm_origin,
       JSON_VALUE(r.body, '$.warm_origin.zero_rtt.request_in_0rtt' RETURNING boolean) AS request_in_0rtt
FROM generic_results r
LEFT JOIN contexts c ON c.id = r.ctx_id
LEFT JOIN environments e ON e.id = r.env_id
WHERE r.kind = 'page_load';
