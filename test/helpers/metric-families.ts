/**
 * The metric families the gateway exports, with their types. test/metrics checks a real gateway's /metrics
 * against these tables; the chart's alerts and dashboard may only use names from them (test/deploy).
 */

/** The gateway's own families, in every mode. */
export const gatewayFamilies: Record<string, string> = {
  krg_build_info: 'gauge',
  krg_http_requests_total: 'counter',
  krg_http_request_duration_seconds: 'histogram',
  krg_http_stream_duration_seconds: 'histogram',
  krg_upstream_request_duration_seconds: 'histogram',
  krg_upstream_errors_total: 'counter',
  krg_auth_failures_total: 'counter',
  krg_sessions_registered: 'gauge',
  krg_event_viewers: 'gauge',
  krg_event_upstream_streams: 'gauge',
  krg_event_upstream_reconnects_total: 'counter',
  krg_event_slow_consumers_dropped_total: 'counter',
  krg_event_gaps_unfilled_total: 'counter',
  krg_event_deliveries_total: 'counter',
  krg_socket_takeovers_total: 'counter',
  // How close the replica is to its connection cap (src/http/connection-limit.ts).
  krg_connections_open: 'gauge',
  krg_connections_limit: 'gauge',
  krg_connections_half_open: 'gauge',
  krg_connections_refused_total: 'counter',
  // The team report (src/report): a team's series appear with its first session.
  krg_questions_opened_total: 'counter',
  krg_questions_closed_total: 'counter',
  krg_question_answer_seconds: 'histogram',
  krg_question_deadline_left_seconds: 'histogram',
  krg_handoffs_total: 'counter',
  krg_handoff_wait_seconds: 'histogram',
}

/** What cluster mode adds. */
export const clusterFamilies: Record<string, string> = {
  krg_redis_connected: 'gauge',
  krg_redis_reconnects_total: 'counter',
  krg_degraded: 'gauge',
  krg_cluster_appends_total: 'counter',
  krg_cluster_entries_appended_total: 'counter',
  krg_cluster_entries_read_total: 'counter',
  krg_cluster_leases_held: 'gauge',
  krg_cluster_lease_changes_total: 'counter',
  krg_cluster_watched_streams: 'gauge',
}

/** The standard process and Node.js families (prom-client's defaults) that the dashboard reads. */
export const standardFamilies: Record<string, string> = {
  process_cpu_seconds_total: 'counter',
  process_resident_memory_bytes: 'gauge',
  nodejs_eventloop_lag_p99_seconds: 'gauge',
}

/** Every series name a query may use: the families above with histograms' suffixes, and Prometheus' `up`. */
export function knownSeries(): Set<string> {
  const out = new Set<string>(['up'])
  for (const [name, type] of Object.entries({
    ...gatewayFamilies,
    ...clusterFamilies,
    ...standardFamilies,
  })) {
    out.add(name)
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) out.add(name + suffix)
  }
  return out
}
