/*
 * harness.h - test process harness: real redis-server and lockd processes on
 * free loopback ports in a temp dir, bounded waits, kill by PID, and a small
 * libcurl client. Used by tests/integration and tests/fault. Not thread safe
 * except th_http (each thread its own th_client).
 */
#ifndef LOCKD_TESTS_LIB_HARNESS_H
#define LOCKD_TESTS_LIB_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

/* ---- checks: print file:line and exit(1) on failure ---- */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            th_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                                       \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_)                                                                              \
            th_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_);                 \
    } while (0)
#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                                       \
            th_fail(__FILE__, __LINE__, "%s == %s: '%s' != '%s'", #a, #b, a_ ? a_ : "(null)",      \
                    b_ ? b_ : "(null)");                                                           \
    } while (0)

void th_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/* Runs a named test case, printing "ok NAME" / counting, when th_selected
 * says so; a case left out prints nothing. */
#define TH_RUN(fn)                                                                                 \
    do {                                                                                           \
        if (th_selected(#fn)) {                                                                    \
            th_case_begin(#fn);                                                                    \
            fn();                                                                                  \
            th_case_end(#fn);                                                                      \
        }                                                                                          \
    } while (0)
void th_case_begin(const char *name);
void th_case_end(const char *name);
/* Runs only the cases whose name contains part (while debugging); NULL
 * leaves the choice to $TH_ONLY, and with neither every case runs. A suite
 * that takes the part as argv[1] calls it before its first TH_RUN. */
void th_only(const char *part);
/* Whether TH_RUN runs the case called name (see th_only). */
bool th_selected(const char *name);
/* Prints "N passed, 0 failed" and returns 0 (a failure already exited);
 * returns 1 when a selection (th_only, $TH_ONLY) ran no case. */
int th_done(void);

/* ---- time ---- */
int64_t th_now_ms(void);
void th_sleep_ms(int64_t ms);
/* Polls cond(arg) every 5 ms until true or timeout; returns whether it held. */
bool th_wait_for(bool (*cond)(void *arg), void *arg, int64_t timeout_ms);

/* ---- processes ---- */
/* A temp dir removed by th_cleanup() (registered atexit on first use). */
const char *th_tmpdir(void);
/* TH_TIME_SCALE (>= 1): how much to stretch latency bounds and waits for a
 * lockd under memcheck or TSan; ordering checks never stretch. */
long long th_time_scale(void);
/* A plain TCP connection to 127.0.0.1:port (fails the test if refused). */
int th_connect(int port);
/* Reads one whole HTTP/1.1 response (Content-Length framed) from fd within
 * 5 s (stretched by th_time_scale); returns its status, or -1 if the
 * connection closed or nothing came. body (cap > 0) gets its body. */
int th_raw_response(int fd, char *body, size_t cap);
/* Sends req on fd, then th_raw_response. */
int th_raw_request(int fd, const char *req, char *body, size_t cap);

struct th_lockd;

struct th_redis {
    pid_t pid;
    int port;
    char dir[256];
};
/* Starts redis-server on a free port (extra: NULL-terminated extra
 * "directive value" strings, e.g. "requirepass secret"). Waits until it
 * answers PING. port 0 = pick a free one. */
void th_redis_start(struct th_redis *r, int port, const char *const *extra);
void th_redis_stop(struct th_redis *r); /* SIGKILL by PID, waits */
/* Starts a sentinel (redis-server FILE --sentinel) on a free port that
 * monitors master at 127.0.0.1:master_port with quorum, down after 1 s, a
 * failover timeout of 3 s (tests stay short). Stop it with th_redis_stop. */
void th_sentinel_start(struct th_redis *s, const char *master, int master_port, int quorum,
                       const char *const *extra);
/* Starts n (>= 3) cluster-enabled redis-servers on free ports
 * (cluster-node-timeout 1000, cluster-require-full-coverage no, plus extra)
 * and makes them one cluster of n primaries (redis-cli --cluster create,
 * no replicas); returns once every node says cluster_state:ok. Stop each
 * with th_redis_stop. */
void th_cluster_start(struct th_redis *nodes, int n, const char *const *extra);
/* Starts a cluster-enabled redis-server (as th_cluster_start's) and makes it
 * a replica of primary (redis-cli --cluster add-node --cluster-slave);
 * returns once it is in sync with primary. */
void th_cluster_add_replica(const struct th_redis *primary, struct th_redis *replica);
/* Starts lockd on a cluster (th_lockd_start): --backend cluster, seeds a
 * and b, --key_prefix prefix, --threads 2, then extra (NULL-terminated
 * "--key", "value" pairs, at most 16 strings, or NULL). */
void th_cluster_lockd_start(struct th_lockd *l, const struct th_redis *a, const struct th_redis *b,
                            const char *prefix, const char *const *extra);
/* Runs redis-cli against it; returns stdout (static buffer). */
const char *th_redis_cli(const struct th_redis *r, const char *args);
/* Total calls of one command from INFO commandstats (e.g. "evalsha"). */
long long th_redis_calls(const struct th_redis *r, const char *cmd);

struct th_lockd {
    pid_t pid;
    int port;
    char url[64];  /* http://127.0.0.1:PORT */
    char log[256]; /* path of its stderr log */
};
/* Starts $LOCKD_BIN (default build/lockd) with --listen 127.0.0.1:0 plus
 * args (NULL-terminated "--key", "value" pairs), waits until /healthz is 200.
 * env: NULL-terminated "KEY=VALUE" strings added to the environment, or NULL. */
void th_lockd_start(struct th_lockd *l, const char *const *args, const char *const *env);
/* Same, but returns false instead of failing when it does not come up (for
 * startup-error tests); exit_code gets its exit status if it exited. */
bool th_lockd_try_start(struct th_lockd *l, const char *const *args, const char *const *env,
                        int *exit_code);
void th_lockd_kill(struct th_lockd *l, int sig); /* signal + wait for exit */
/* Sends sig and waits up to timeout_ms; returns exit status or -1. */
int th_lockd_signal_wait(struct th_lockd *l, int sig, int64_t timeout_ms);

/* ---- HTTP (libcurl) ---- */
/* "<l's url><path><name>" in one of 4 buffers of the calling thread, used
 * in turn (load clients build URLs at once; a shared buffer let one
 * thread's URL be overwritten while curl read it). */
const char *th_url(const struct th_lockd *l, const char *path, const char *name);
struct th_resp {
    long status;
    char *body; /* NUL-terminated, malloc'd */
    size_t len;
    json_t *json; /* parsed body or NULL; new reference */
    char headers[4096];
};
/* One keep-alive connection; one per thread. */
struct th_client;
struct th_client *th_client_new(void);
void th_client_free(struct th_client *c);
/* method "GET"/"POST"/..., url absolute, body may be NULL, hdrs NULL-terminated
 * "Name: value" strings or NULL. */
void th_http(struct th_client *c, const char *method, const char *url, const char *body,
             const char *const *hdrs, struct th_resp *out);
void th_resp_free(struct th_resp *r);
/* Header value from a response (static per-call buffer) or NULL. */
const char *th_header(const struct th_resp *r, const char *name);
/* Convenience: json field getters (0 / NULL when missing). */
const char *th_jstr(const struct th_resp *r, const char *key);
long long th_jint(const struct th_resp *r, const char *key);
/* The error code string of an error response or NULL. */
const char *th_jerr(const struct th_resp *r);

/* ---- exclusion under load ---- */
#define TH_EXCL_NAMES 16
/* What load clients saw of up to TH_EXCL_NAMES names (by index): never two
 * holders of a name at once, its tokens increasing in grant order. Define
 * one as {.mu = PTHREAD_MUTEX_INITIALIZER}; th_excl_reset zeroes it. */
struct th_excl {
    pthread_mutex_t mu;
    long long last[TH_EXCL_NAMES]; /* under mu: the last token granted */
    atomic_int holders[TH_EXCL_NAMES];
    atomic_int overlaps, regressions, grants;
};
void th_excl_reset(struct th_excl *x);
/* A client was granted name (index k) with token: an overlap when another
 * client holds it, a regression (said on stderr) unless token is above the
 * last one; one grant more. Call th_excl_leave before releasing it. Any
 * thread. */
void th_excl_enter(struct th_excl *x, int k, const char *name, long long token);
void th_excl_leave(struct th_excl *x, int k);

/* ---- lockd conveniences ---- */
/* th_http with one more header line hdr ("Name: value", or NULL); returns
 * the status. keep (or NULL) gets the response (the caller frees it). */
long th_status(struct th_client *c, const char *method, const char *url, const char *body,
               const char *hdr, struct th_resp *keep);
/* th_status with a "Lock-Lease: lease" header when lease is not NULL. */
long th_req(struct th_client *c, const char *method, const char *url, const char *body,
            const char *lease, struct th_resp *keep);
/* An acquire: POSTs body to url; on 200 *token gets its fencing_token and
 * hdr (hdrcap) its "Lock-Lease: <lease>" line, else err (errcap, or NULL)
 * the response body. Returns the status. */
long th_grant(struct th_client *c, const char *url, const char *body, long long *token, char *hdr,
              size_t hdrcap, char *err, size_t errcap);
/* Try-acquires each of names (a 1 s ttl) through l, again every 20 ms
 * while refused, until each was granted or within_ms (stretched by
 * th_time_scale) passed since t0 (th_now_ms). Returns how many were
 * granted; each granted one is left to its ttl. (A name given back in the
 * background is free again soon: the 503 tests.) */
int th_until_free(struct th_client *c, const struct th_lockd *l, const char *const *names, int n,
                  int64_t t0, int64_t within_ms);
/* The sum of every series of metric (e.g. "lockd_backend_restarts_total")
 * in l's /metrics, 0 when it has none; fails the test unless /metrics
 * answers 200. */
long long th_metric_sum(struct th_client *c, const struct th_lockd *l, const char *metric);
/* A session on a (ttl 1 s, lock-delay 500 ms) holds name with a 600 ms
 * lease it outlives four times while heartbeated (the watchdog renews it);
 * b cannot take it meanwhile (409 naming the session's token). Heartbeats
 * stop: the session expires, its lock is released with the lock-delay (b
 * sees it), and only then b gets name, within 10 s. Fails the test else. */
void th_session_handoff(struct th_client *c, const struct th_lockd *a, const struct th_lockd *b,
                        const char *name);
/* th_metric_sum of lockd_backend_restarts_total (every backend node's). */
long long th_restarts(struct th_client *c, const struct th_lockd *l);
/* Whether l's log has a line containing a and b (b may be NULL). */
bool th_log_has(const struct th_lockd *l, const char *a, const char *b);
/* How many leases l's log says it re-asserted after backend restarts
 * ("re-asserted leases on redis ... ms: N" lines, summed); -1 without a log. */
long th_log_reasserted(const struct th_lockd *l);

#endif
