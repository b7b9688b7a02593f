/*
 * metrics.h - process-wide counters, gauges and histograms, updated with
 * relaxed atomics so any thread may count and a scrape never stalls a
 * request. metrics_render() writes Prometheus text exposition 0.0.4.
 */
#ifndef LOCKD_SERVER_METRICS_H
#define LOCKD_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* Counters and gauges without labels, or with one fixed label value. */
enum metric_id {
    M_ACQUIRE_GRANTED,
    M_ACQUIRE_LOCKED,
    M_ACQUIRE_ERROR,
    M_RELEASE_OK,
    M_RELEASE_NOT_HELD,
    M_RELEASE_ERROR,
    M_RENEW_OK,
    M_RENEW_NOT_HELD,
    M_RENEW_ERROR,
    M_WATCHDOG_OK,
    M_WATCHDOG_LOST,
    M_WATCHDOG_ERROR,
    M_GRANT_EXCLUSIVE, /* grants by mode: lockd_grants_total{mode} */
    M_GRANT_SHARED,
    M_GRANT_SEMAPHORE,
    M_LEASES_LOST,
    M_SESSIONS_EXPIRED,
    M_FORCED_RELEASES, /* an operator's force-unlocks that released something */
    M_BACKEND_ERRORS,
    M_CLUSTER_MOVED, /* cluster: redirections followed, lockd_cluster_redirections_total{kind} */
    M_CLUSTER_ASK,
    M_LOCKS_HELD,       /* gauge: session-bound leases held through this lockd */
    M_LOCKS_HELD_PLAIN, /* gauge: plain leases granted here, not seen released or expired */
    M_SESSIONS,         /* gauge */
    M_WAITERS,          /* gauge */
    M__COUNT
};

enum hist_id { H_HANDOFF, H_ACQUIRE_WAIT, H_LOCK_HOLD, H__COUNT };

void metrics_add(enum metric_id id, int64_t delta);
int64_t metrics_get(enum metric_id id);
/* Observes a duration in microseconds. */
void metrics_observe(enum hist_id id, int64_t usec);

/* One backend call's latency, by its enum bk_op (backend.h): the op label
 * of lockd_backend_request_duration_seconds. An op past BK_OP_COUNT is
 * dropped. */
void metrics_backend_observe(unsigned op, int64_t usec);

/* Backend calls that failed (LK_BACKEND_DOWN), by node index as the
 * backend's nodes() lists them; indexes past METRICS_MAX_NODES are dropped. */
#define METRICS_MAX_NODES 16
void metrics_backend_error(size_t node);
int64_t metrics_backend_errors(size_t node);

/* One HTTP request: counted by route, method and status code, its latency
 * observed by route. route is one of a small fixed set of labels, each a
 * string with static storage (its address identifies it); a method
 * other than the usual ones is counted as "other", so what a client sends
 * can neither grow the table nor break the exposition. */
void metrics_http(const char *route, const char *method, int status, int64_t usec);
/* Declares a route up front, so its latency series exist (at zero) before
 * its first request. */
void metrics_route(const char *route);

/* Renders the exposition into a malloc'd buffer; caller frees. backend_up
 * lines come from the caller through extra (already formatted, may be NULL). */
char *metrics_render(const char *extra, size_t *len);

#endif
