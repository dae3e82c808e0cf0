-- page_load records: one row per browser load. Durations derived here from the
-- Navigation Timing phase timestamps (ms since navigation start); the raw entry, the HAR path
-- and the per-resource timings stay available as JSON.
CREATE OR REPLACE VIEW v_page_load AS
SELECT r.id, r.campaign, r.run, r.unit, r.vantage_id, r.provider, r.region, r.network_profile,
       r.started_at, r.status, r.error,
       r.body ->> 'url' AS url,
       r.body ->> 'final_url' AS final_url,
       r.body ->> 'browser' AS browser,
       r.body ->> 'browser_version' AS browser_version,
       r.body ->> 'driver_version' AS driver_version,
       r.body ->> 'dns_mode' AS dns_mode,
       r.body ->> 'dns_transport' AS dns_transport,
       r.body ->> 'resolver' AS resolver,
       r.body ->> 'http' AS http,
       (r.body ->> 'timeout_s')::float8 AS timeout_s,
       (r.body ->> 'plt_ms')::float8 AS plt_ms,
       (r.body -> 'navigation' ->> 'domContentLoadedEventStart')::float8 AS dom_content_loaded_ms,
       (r.body -> 'navigation' ->> 'responseStart')::float8 AS ttfb_ms,
       (r.body -> 'navigation' ->> 'domainLookupEnd')::float8
         - (r.body -> 'navigation' ->> 'domainLookupStart')::float8 AS doc_dns_ms,
       (r.body -> 'navigation' ->> 'connectEnd')::float8
         - (r.body -> 'navigation' ->> 'connectStart')::float8 AS doc_connect_ms,
       CASE WHEN (r.body -> 'navigation' ->> 'secureConnectionStart')::float8 > 0
            THEN (r.body -> 'navigation' ->> 'connectEnd')::float8
                 - (r.body -> 'navigation' ->> 'secureConnectionStart')::float8 END AS doc_tls_ms,
       (r.body ->> 'first_paint_ms')::float8 AS first_paint_ms,
       (r.body ->> 'first_contentful_paint_ms')::float8 AS first_contentful_paint_ms,
       (r.body ->> 'lcp_ms')::float8 AS lcp_ms,
       r.body ->> 'next_hop_protocol' AS next_hop_protocol,
       (r.body ->> 'unique_hostnames')::int AS unique_hostnames,
       (r.body ->> 'dns_lookups')::int AS dns_lookups,
       jsonb_array_length(COALESCE(r.body -> 'resources', '[]'::jsonb)) AS resources,
       (r.body ->> 'dns_transport_verified')::boolean AS dns_transport_verified,
       (r.body -> 'stub' ->> 'queries')::int AS stub_queries,
       (r.body -> 'stub' ->> 'overhead_us_p50')::float8 AS stub_overhead_us_p50,
       r.body ->> 'har_path' AS har_path,
       (r.body ->> 'har_valid')::boolean AS har_valid,
       r.body -> 'resolver_rtt_ms' AS resolver_rtt_ms,
       r.body -> 'hostnames' AS hostnames,
       r.body -> 'protocols' AS protocols,
       r.body -> 'order' AS load_order,
       r.env ->> 'seed' AS seed
FROM results r
WHERE r.kind = 'page_load';
