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
-- another JSON type or out of the column's range), differences and sums are computed in
-- numeric and a total out of its column's range is NULL, the RTT multiples use an access RTT
-- of at least 1 us (records v1 refuse a smaller one).
-- The columns of results are named, not r.*: a view expanding r.* depends on every column of
-- results, so that no migration could drop or change one without re-creating it.
-- engine, engine_version: what timed the query (our engine or getdns) and its
-- version; engine_run_time_ms: the engine's own timing of its call (getdns's run time), NULL
-- for records that do not carry it.
CREATE OR REPLACE VIEW v_dns_query AS
WITH d AS (
  SELECT r.id, r.campaign, r.run, r.unit, r.vantage_id, r.provider, r.region, r.network_profile,
         r.started_at, r.status, r.error, r.env, r.body,
         JSON_VALUE(r.body, '$.t_start' RETURNING bigint) AS t_start,
         JSON_VALUE(r.body, '$.t_connected' RETURNING bigint) AS t_connected,
         JSON_VALUE(r.body, '$.t_tls_done' RETURNING bigint) AS t_tls_done,
         JSON_VALUE(r.body, '$.t_query_sent' RETURNING bigint) AS t_query_sent,
         JSON_VALUE(r.body, '$.t_response' RETURNING bigint) AS t_response,
         JSON_VALUE(r.body, '$.access_rtt_ms' RETURNING float8) AS access_rtt_ms,
         JSON_VALUE(r.body, '$.handshake_bytes_sent' RETURNING bigint) AS handshake_bytes_sent,
         JSON_VALUE(r.body, '$.handshake_bytes_received' RETURNING bigint) AS handshake_bytes_received,
         JSON_VALUE(r.body, '$.handshake_packets_sent' RETURNING int) AS handshake_packets_sent,
         JSON_VALUE(r.body, '$.handshake_packets_received' RETURNING int) AS handshake_packets_received,
         JSON_VALUE(r.body, '$.query_bytes_sent' RETURNING bigint) AS query_bytes_sent,
         JSON_VALUE(r.body, '$.query_bytes_received' RETURNING bigint) AS query_bytes_received,
         JSON_VALUE(r.body, '$.query_packets_sent' RETURNING int) AS query_packets_sent,
         JSON_VALUE(r.body, '$.query_packets_received' RETURNING int) AS query_packets_received,
         CASE WHEN r.body ->> 'transport' IN ('do53', 'doq', 'doh3') THEN 28 ELSE 52 END AS hdr_bytes
  FROM results r
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
       d.body ->> 'resolver' AS resolver,
       d.body ->> 'transport' AS transport,
       d.body ->> 'address' AS address,
       JSON_VALUE(d.body, '$.port' RETURNING int) AS port,
       d.body ->> 'tls_name' AS tls_name,
       d.body ->> 'url' AS url,
       d.body ->> 'qname' AS qname,
       d.body ->> 'qtype' AS qtype,
       JSON_VALUE(d.body, '$.sequence' RETURNING int) AS sequence,
       d.body ->> 'policy' AS policy,
       JSON_VALUE(d.body, '$.idle_timeout_s' RETURNING float8) AS idle_timeout_s,
       JSON_VALUE(d.body, '$.timeout_s' RETURNING float8) AS timeout_s,
       JSON_VALUE(d.body, '$.max_attempts' RETURNING int) AS max_attempts,
       JSON_VALUE(d.body, '$.attempts' RETURNING int) AS attempts,
       d.t_start, d.t_connected, d.t_tls_done, d.t_query_sent, d.t_response,
       JSON_VALUE(d.body, '$.connection_reused' RETURNING boolean) AS connection_reused,
       JSON_VALUE(d.body, '$.resumed' RETURNING boolean) AS resumed,
       JSON_VALUE(d.body, '$.early_data' RETURNING boolean) AS early_data,
       d.body ->> 'tls_version' AS tls_version,
       d.body ->> 'alpn' AS alpn,
       d.body ->> 'quic_version' AS quic_version,
       d.body ->> 'http_version' AS http_version,
       d.body ->> 'http_method' AS http_method,
       JSON_VALUE(d.body, '$.http_status' RETURNING int) AS http_status,
       d.body ->> 'rcode' AS rcode,
       d.body -> 'answers' AS answers,
       COALESCE(JSON_VALUE(d.body, '$.answers.size()' RETURNING int), 0) AS answer_count,
       JSON_VALUE(d.body, '$.response_size' RETURNING int) AS response_size,
       (d.t_connected::numeric - d.t_start)::float8 / 1e6 AS connect_ms,
       (d.t_tls_done::numeric - COALESCE(d.t_connected, d.t_start))::float8 / 1e6 AS handshake_ms,
       (d.t_response::numeric - d.t_query_sent)::float8 / 1e6 AS exchange_ms,
       (d.t_response::numeric - d.t_start)::float8 / 1e6 AS total_ms,
       d.access_rtt_ms,
       (d.t_response::numeric - d.t_query_sent)::float8 / 1e6 / d.rtt_divisor AS exchange_rtt_multiple,
       (d.t_response::numeric - d.t_start)::float8 / 1e6 / d.rtt_divisor AS total_rtt_multiple,
       d.body ->> 'wire_basis' AS wire_basis,
       d.handshake_bytes_sent, d.handshake_bytes_received,
       d.handshake_packets_sent, d.handshake_packets_received,
       d.query_bytes_sent, d.query_bytes_received,
       d.query_packets_sent, d.query_packets_received,
       CASE WHEN abs(d.bytes_n) <= 9223372036854775807 THEN d.bytes_n::bigint END AS total_bytes,
       CASE WHEN abs(d.packets_n) <= 2147483647 THEN d.packets_n::int END AS total_packets,
       CASE WHEN abs(d.bytes_n + d.hdr_bytes * d.packets_n) <= 9223372036854775807
            THEN (d.bytes_n + d.hdr_bytes * d.packets_n)::bigint END AS total_ip_bytes,
       d.env -> 'dns' AS tool_versions,
       JSON_VALUE(d.body, '$.cache_warmed' RETURNING boolean) AS cache_warmed,
       JSON_VALUE(d.body, '$.engine' RETURNING text) AS engine,
       JSON_VALUE(d.body, '$.engine_version' RETURNING text) AS engine_version,
       JSON_VALUE(d.body, '$.engine_run_time_ms' RETURNING float8) AS engine_run_time_ms
FROM t AS d;
