-- dns_query records: one row per DNS query (vantage_agent/dns, docs/dns.md).
-- Phase timestamps are CLOCK_MONOTONIC ns of the measuring process; durations are derived
-- here in ms: connect_ms (TCP connect / first QUIC flight), handshake_ms (TLS or QUIC
-- handshake after connect), exchange_ms = t_response - t_query_sent, total_ms = t_response -
-- t_start (the resolution time incl. handshakes: 000_6647a8606a2226e0.txt §V-B "exchange
-- time"), and their multiples of the configured access RTT (testbed).
-- Bytes: layer-4 payload bytes per phase and direction; *_ip_bytes add the IPv4 + UDP (28 B)
-- or IPv4 + TCP with timestamps (52 B) headers per packet, to compare with
-- 003_b61199a6a5b37f70.txt §5 (UDP 182 B / 2 packets; DoH 5,737 B / 27; reused 864 B / 8).
CREATE OR REPLACE VIEW v_dns_query AS
WITH d AS (
  SELECT r.*,
         (r.body ->> 't_start')::bigint AS t_start,
         (r.body ->> 't_connected')::bigint AS t_connected,
         (r.body ->> 't_tls_done')::bigint AS t_tls_done,
         (r.body ->> 't_query_sent')::bigint AS t_query_sent,
         (r.body ->> 't_response')::bigint AS t_response,
         (r.body ->> 'access_rtt_ms')::float8 AS access_rtt_ms,
         CASE WHEN r.body ->> 'transport' IN ('do53', 'doq', 'doh3') THEN 28 ELSE 52 END AS hdr_bytes
  FROM results r
  WHERE r.kind = 'dns_query'
)
SELECT d.id, d.campaign, d.run, d.unit, d.vantage_id, d.provider, d.region, d.network_profile,
       d.started_at, d.status, d.error,
       d.body ->> 'resolver' AS resolver,
       d.body ->> 'transport' AS transport,
       d.body ->> 'address' AS address,
       (d.body ->> 'port')::int AS port,
       d.body ->> 'tls_name' AS tls_name,
       d.body ->> 'url' AS url,
       d.body ->> 'qname' AS qname,
       d.body ->> 'qtype' AS qtype,
       (d.body ->> 'sequence')::int AS sequence,
       d.body ->> 'policy' AS policy,
       (d.body ->> 'idle_timeout_s')::float8 AS idle_timeout_s,
       (d.body ->> 'timeout_s')::float8 AS timeout_s,
       (d.body ->> 'max_attempts')::int AS max_attempts,
       (d.body ->> 'attempts')::int AS attempts,
       d.t_start, d.t_connected, d.t_tls_done, d.t_query_sent, d.t_response,
       (d.body ->> 'connection_reused')::boolean AS connection_reused,
       (d.body ->> 'resumed')::boolean AS resumed,
       (d.body ->> 'early_data')::boolean AS early_data,
       d.body ->> 'tls_version' AS tls_version,
       d.body ->> 'alpn' AS alpn,
       d.body ->> 'quic_version' AS quic_version,
       d.body ->> 'http_version' AS http_version,
       d.body ->> 'http_method' AS http_method,
       (d.body ->> 'http_status')::int AS http_status,
       d.body ->> 'rcode' AS rcode,
       d.body -> 'answers' AS answers,
       jsonb_array_length(COALESCE(d.body -> 'answers', '[]'::jsonb)) AS answer_count,
       (d.body ->> 'response_size')::int AS response_size,
       (d.t_connected - d.t_start)::float8 / 1e6 AS connect_ms,
       (d.t_tls_done - COALESCE(d.t_connected, d.t_start))::float8 / 1e6 AS handshake_ms,
       (d.t_response - d.t_query_sent)::float8 / 1e6 AS exchange_ms,
       (d.t_response - d.t_start)::float8 / 1e6 AS total_ms,
       d.access_rtt_ms,
       (d.t_response - d.t_query_sent)::float8 / 1e6 / NULLIF(d.access_rtt_ms, 0) AS exchange_rtt_multiple,
       (d.t_response - d.t_start)::float8 / 1e6 / NULLIF(d.access_rtt_ms, 0) AS total_rtt_multiple,
       d.body ->> 'wire_basis' AS wire_basis,
       (d.body ->> 'handshake_bytes_sent')::bigint AS handshake_bytes_sent,
       (d.body ->> 'handshake_bytes_received')::bigint AS handshake_bytes_received,
       (d.body ->> 'handshake_packets_sent')::int AS handshake_packets_sent,
       (d.body ->> 'handshake_packets_received')::int AS handshake_packets_received,
       (d.body ->> 'query_bytes_sent')::bigint AS query_bytes_sent,
       (d.body ->> 'query_bytes_received')::bigint AS query_bytes_received,
       (d.body ->> 'query_packets_sent')::int AS query_packets_sent,
       (d.body ->> 'query_packets_received')::int AS query_packets_received,
       COALESCE((d.body ->> 'handshake_bytes_sent')::bigint, 0) + COALESCE((d.body ->> 'handshake_bytes_received')::bigint, 0)
         + (d.body ->> 'query_bytes_sent')::bigint + (d.body ->> 'query_bytes_received')::bigint AS total_bytes,
       COALESCE((d.body ->> 'handshake_packets_sent')::int, 0) + COALESCE((d.body ->> 'handshake_packets_received')::int, 0)
         + (d.body ->> 'query_packets_sent')::int + (d.body ->> 'query_packets_received')::int AS total_packets,
       COALESCE((d.body ->> 'handshake_bytes_sent')::bigint, 0) + COALESCE((d.body ->> 'handshake_bytes_received')::bigint, 0)
         + (d.body ->> 'query_bytes_sent')::bigint + (d.body ->> 'query_bytes_received')::bigint
         + d.hdr_bytes * (COALESCE((d.body ->> 'handshake_packets_sent')::int, 0)
                          + COALESCE((d.body ->> 'handshake_packets_received')::int, 0)
                          + (d.body ->> 'query_packets_sent')::int + (d.body ->> 'query_packets_received')::int)
         AS total_ip_bytes,
       d.env -> 'dns' AS tool_versions,
       (d.body ->> 'cache_warmed')::boolean AS cache_warmed
FROM d;
