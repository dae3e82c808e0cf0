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
-- the rest of its body in its dns_shapes row, whose columns are read from that body with
-- JSON_VALUE and ->>) or, when its body does not fit those columns, a generic_results row
-- whose per-query values are read from its whole body by the same expressions. The dimension rows
-- are LEFT JOINed on their primary keys (every id exists), so a query that reads none of a
-- dimension's columns does not join it (environments, for tool_versions only).
-- No WITH (0024): the two steps are subqueries in FROM. Postgres never pulls a view with a
-- WITH list up into the query that reads it, so every row went through the view's whole
-- projection (a Result node and a subquery scan above the scans); written this way the
-- planner flattens it and computes only the columns a query reads.
-- One union of single tables, the joins above it (0026): a dns_query stored whole has its
-- dns_shapes row too (its body without the per-record keys), so both tables give shape_id and
-- the shape columns come from one join. Postgres pulls a UNION ALL member up into the query
-- only when it reads one table with no WHERE of its own (a join or a filter in a member kept a
-- subquery scan over each member's whole projection, ~20 % of a failure rate over 10 M rows):
-- the members carry their kind and the filter on it sits above the union, where the planner
-- drops it for dns_queries and pushes it into the scan of generic_results.
CREATE OR REPLACE VIEW v_dns_query AS
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
FROM (
  SELECT d.*,
         COALESCE(d.handshake_bytes_sent, 0)::numeric + COALESCE(d.handshake_bytes_received, 0)
           + d.query_bytes_sent + d.query_bytes_received AS bytes_n,
         COALESCE(d.handshake_packets_sent, 0)::numeric + COALESCE(d.handshake_packets_received, 0)
           + d.query_packets_sent + d.query_packets_received AS packets_n,
         CASE WHEN d.access_rtt_ms >= 0.001 THEN d.access_rtt_ms END AS rtt_divisor
  FROM (
    SELECT u.id, c.campaign, c.run, u.unit, c.vantage_id, c.provider, c.region, c.network_profile,
           u.started_at, u.status, u.error,
           s.resolver, s.transport, s.address, s.port, s.tls_name, s.url, s.qname, s.qtype, u.sequence, s.policy,
           s.idle_timeout_s, s.timeout_s, s.max_attempts, s.attempts,
           u.t_start, u.t_connected, u.t_tls_done, u.t_query_sent, u.t_response,
           s.connection_reused, s.resumed, s.early_data, s.tls_version, s.alpn, s.quic_version, s.http_version,
           s.http_method, s.http_status, s.rcode, u.answers, u.response_size, s.access_rtt_ms,
           s.wire_basis, u.handshake_bytes_sent, u.handshake_bytes_received, u.handshake_packets_sent,
           u.handshake_packets_received, u.query_bytes_sent, u.query_bytes_received, u.query_packets_sent,
           u.query_packets_received, e.envb -> 'dns' AS tool_versions, s.cache_warmed, s.engine, s.engine_version,
           s.engine_run_time_ms, s.hdr_bytes
    FROM (
      SELECT 'dns_query'::text AS kind, q.id, q.ctx_id, q.env_id, q.shape_id, q.unit, q.started_at, q.status, q.error,
             q.sequence, q.t_start, q.t_connected, q.t_tls_done, q.t_query_sent, q.t_response,
             q.answers::jsonb AS answers, q.response_size,
             q.handshake_bytes_sent, q.handshake_bytes_received, q.handshake_packets_sent,
             q.handshake_packets_received, q.query_bytes_sent, q.query_bytes_received, q.query_packets_sent,
             q.query_packets_received
      FROM dns_queries q
      UNION ALL
      SELECT r.kind, r.id, r.ctx_id, r.env_id, r.shape_id, r.unit, r.started_at, r.status, r.error,
             JSON_VALUE(r.body, '$.sequence' RETURNING int),
             JSON_VALUE(r.body, '$.t_start' RETURNING bigint), JSON_VALUE(r.body, '$.t_connected' RETURNING bigint),
             JSON_VALUE(r.body, '$.t_tls_done' RETURNING bigint), JSON_VALUE(r.body, '$.t_query_sent' RETURNING bigint),
             JSON_VALUE(r.body, '$.t_response' RETURNING bigint),
             r.body -> 'answers', JSON_VALUE(r.body, '$.response_size' RETURNING int),
             JSON_VALUE(r.body, '$.handshake_bytes_sent' RETURNING bigint),
             JSON_VALUE(r.body, '$.handshake_bytes_received' RETURNING bigint),
             JSON_VALUE(r.body, '$.handshake_packets_sent' RETURNING int),
             JSON_VALUE(r.body, '$.handshake_packets_received' RETURNING int),
             JSON_VALUE(r.body, '$.query_bytes_sent' RETURNING bigint),
             JSON_VALUE(r.body, '$.query_bytes_received' RETURNING bigint),
             JSON_VALUE(r.body, '$.query_packets_sent' RETURNING int),
             JSON_VALUE(r.body, '$.query_packets_received' RETURNING int)
      FROM generic_results r
    ) AS u
    LEFT JOIN contexts c ON c.id = u.ctx_id
    LEFT JOIN dns_shapes s ON s.id = u.shape_id
    LEFT JOIN environments e ON e.id = u.env_id
    WHERE u.kind = 'dns_query'
  ) AS d
) AS d;
