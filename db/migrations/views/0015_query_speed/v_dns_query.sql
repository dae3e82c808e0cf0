-- dns_query records: one row per DNS query (vantage_agent/dns, docs/dns.md).
-- Phase timestamps are CLOCK_MONOTONIC ns of the measuring process; durations are derived
-- here in ms: connect_ms (TCP connect / first QUIC flight), handshake_ms (TLS or QUIC
-- handshake after connect), exchange_ms = t_response - t_query_sent, total_ms = t_response -
-- t_start (the resolution time incl. handshakes: 000_6647a8606a2226e0.txt §V-B "exchange
-- time"), and their multiples of the configured access RTT (testbed).
-- Bytes: layer-4 payload bytes per phase and direction; *_ip_bytes add the IPv4 + UDP (28 B)
-- or IPv4 + TCP with timestamps (52 B) headers per packet, to compare with
-- 003_b61199a6a5b37f70.txt §5 (UDP 182 B / 2 packets; DoH 5,737 B / 27; reused 864 B / 8).
-- Never an error on stored data: body values are read with JSON_VALUE (NULL for a value of
-- another JSON type or out of the column's range), differences are computed by
-- dnscamp_ns_ms (in bigint when both timestamps are >= 0, as records v1 have them, else in
-- numeric: the same float8), sums in numeric and a total out of its column's range is NULL,
-- the RTT multiples use an access RTT of at least 1 us (records v1 refuse a smaller one).
-- engine, engine_version: what timed the query (our engine or getdns) and its
-- version; engine_run_time_ms: the engine's own timing of its call (getdns's run time), NULL
-- for records that do not carry it.
-- Storage (docs/store.md): a query is a dns_queries row (per-query integers typed,
-- the rest of its body in its dns_shapes row, whose columns are read from that body by the
-- same expressions as below) or, when its body does not fit those columns, a generic_results
-- row read from its whole body; the two branches give the same columns. The dimension rows
-- are LEFT JOINed on their primary keys (every id exists), so a query that reads none of a
-- dimension's columns does not join it (environments, for tool_versions only).
CREATE OR REPLACE VIEW v_dns_query AS
WITH d AS (
  SELECT q.id, c.campaign, c.run, q.unit, c.vantage_id, c.provider, c.region, c.network_profile,
         q.started_at, q.status, q.error,
         s.resolver, s.transport, s.address, s.port, s.tls_name, s.url, s.qname, s.qtype, q.sequence, s.policy,
         s.idle_timeout_s, s.timeout_s, s.max_attempts, s.attempts,
         q.t_start, q.t_connected, q.t_tls_done, q.t_query_sent, q.t_response,
         s.connection_reused, s.resumed, s.early_data, s.tls_version, s.alpn, s.quic_version, s.http_version,
         s.http_method, s.http_status, s.rcode, q.answers::jsonb AS answers, q.response_size, s.access_rtt_ms,
         s.wire_basis, q.handshake_bytes_sent, q.handshake_bytes_received, q.handshake_packets_sent,
         q.handshake_packets_received, q.query_bytes_sent, q.query_bytes_received, q.query_packets_sent,
         q.query_packets_received, e.envb -> 'dns' AS tool_versions, s.cache_warmed, s.engine, s.engine_version,
         s.engine_run_time_ms, s.hdr_bytes
  FROM dns_queries q
  LEFT JOIN contexts c ON c.id = q.ctx_id
  LEFT JOIN dns_shapes s ON s.id = q.shape_id
  LEFT JOIN environments e ON e.id = q.env_id
  UNION ALL
  SELECT r.id, c.campaign, c.run, r.unit, c.vantage_id, c.provider, c.region, c.network_profile,
         r.started_at, r.status, r.error,
         r.body ->> 'resolver', r.body ->> 'transport', r.body ->> 'address',
         JSON_VALUE(r.body, '$.port' RETURNING int), r.body ->> 'tls_name', r.body ->> 'url',
         r.body ->> 'qname', r.body ->> 'qtype', JSON_VALUE(r.body, '$.sequence' RETURNING int),
         r.body ->> 'policy', JSON_VALUE(r.body, '$.idle_timeout_s' RETURNING float8),
         JSON_VALUE(r.body, '$.timeout_s' RETURNING float8), JSON_VALUE(r.body, '$.max_attempts' RETURNING int),
         JSON_VALUE(r.body, '$.attempts' RETURNING int),
         JSON_VALUE(r.body, '$.t_start' RETURNING bigint), JSON_VALUE(r.body, '$.t_connected' RETURNING bigint),
         JSON_VALUE(r.body, '$.t_tls_done' RETURNING bigint), JSON_VALUE(r.body, '$.t_query_sent' RETURNING bigint),
         JSON_VALUE(r.body, '$.t_response' RETURNING bigint),
         JSON_VALUE(r.body, '$.connection_reused' RETURNING boolean), JSON_VALUE(r.body, '$.resumed' RETURNING boolean),
         JSON_VALUE(r.body, '$.early_data' RETURNING boolean), r.body ->> 'tls_version', r.body ->> 'alpn',
         r.body ->> 'quic_version', r.body ->> 'http_version', r.body ->> 'http_method',
         JSON_VALUE(r.body, '$.http_status' RETURNING int), r.body ->> 'rcode', r.body -> 'answers',
         JSON_VALUE(r.body, '$.response_size' RETURNING int), JSON_VALUE(r.body, '$.access_rtt_ms' RETURNING float8),
         r.body ->> 'wire_basis',
         JSON_VALUE(r.body, '$.handshake_bytes_sent' RETURNING bigint),
         JSON_VALUE(r.body, '$.handshake_bytes_received' RETURNING bigint),
         JSON_VALUE(r.body, '$.handshake_packets_sent' RETURNING int),
         JSON_VALUE(r.body, '$.handshake_packets_received' RETURNING int),
         JSON_VALUE(r.body, '$.query_bytes_sent' RETURNING bigint),
         JSON_VALUE(r.body, '$.query_bytes_received' RETURNING bigint),
         JSON_VALUE(r.body, '$.query_packets_sent' RETURNING int),
         JSON_VALUE(r.body, '$.query_packets_received' RETURNING int),
         e.envb -> 'dns', JSON_VALUE(r.body, '$.cache_warmed' RETURNING boolean),
         JSON_VALUE(r.body, '$.engine' RETURNING text), JSON_VALUE(r.body, '$.engine_version' RETURNING text),
         JSON_VALUE(r.body, '$.engine_run_time_ms' RETURNING float8),
         CASE WHEN r.body ->> 'transport' IN ('do53', 'doq', 'doh3') THEN 28 ELSE 52 END
  FROM generic_results r
  LEFT JOIN contexts c ON c.id = r.ctx_id
  LEFT JOIN environments e ON e.id = r.env_id
  WHERE r.kind = 'dns_query'
), t AS (
  SELECT d.*,
         COALESCE(d.handshake_bytes_sent, 0)::numeric + COALESCE(d.handshake_bytes_received, 0)
           + d.query_bytes_sent + d.query_bytes_received AS bytes_n,
         COALESCE(d.handshake_packets_sent, 0)::numeric + COALESCE(d.handshake_packets_received, 0)
           + d.query_packets_sent + d.query_packets_received AS packets_n,
         CASE WHEN d.access_rtt_ms >= 0.001 THEN d.access_rtt_ms END AS rtt_divisor
  FROM d
)
SELECT d.id, d.campaign, d.run, d.unit, d.vantage_id, d.provider, d.region, d.network_profile,
       d.started_at, d.status, d.error,
       d.resolver, d.transport, d.address, d.port, d.tls_name, d.url, d.qname, d.qtype, d.sequence, d.policy,
       d.idle_timeout_s, d.timeout_s, d.max_attempts, d.attempts,
       d.t_start, d.t_connected, d.t_tls_done, d.t_query_sent, d.t_response,
       d.connection_reused, d.resumed, d.early_data, d.tls_version, d.alpn, d.quic_version, d.http_version,
       d.http_method, d.http_status, d.rcode, d.answers,
       COALESCE(JSON_VALUE(d.answers, '$.size()' RETURNING int), 0) AS answer_count,
       d.response_size,
       dnscamp_ns_ms(d.t_connected, d.t_start) AS connect_ms,
       dnscamp_ns_ms(d.t_tls_done, COALESCE(d.t_connected, d.t_start)) AS handshake_ms,
       dnscamp_ns_ms(d.t_response, d.t_query_sent) AS exchange_ms,
       dnscamp_ns_ms(d.t_response, d.t_start) AS total_ms,
       d.access_rtt_ms,
       dnscamp_ns_ms(d.t_response, d.t_query_sent) / d.rtt_divisor AS exchange_rtt_multiple,
       dnscamp_ns_ms(d.t_response, d.t_start) / d.rtt_divisor AS total_rtt_multiple,
       d.wire_basis,
       d.handshake_bytes_sent, d.handshake_bytes_received,
       d.handshake_packets_sent, d.handshake_packets_received,
       d.query_bytes_sent, d.query_bytes_received,
       d.query_packets_sent, d.query_packets_received,
       CASE WHEN abs(d.bytes_n) <= 9223372036854775807 THEN d.bytes_n::bigint END AS total_bytes,
       CASE WHEN abs(d.packets_n) <= 2147483647 THEN d.packets_n::int END AS total_packets,
       CASE WHEN abs(d.bytes_n + d.hdr_bytes * d.packets_n) <= 9223372036854775807
            THEN (d.bytes_n + d.hdr_bytes * d.packets_n)::bigint END AS total_ip_bytes,
       d.tool_versions,
       d.cache_warmed,
       d.engine,
       d.engine_version,
       d.engine_run_time_ms
FROM t AS d;
