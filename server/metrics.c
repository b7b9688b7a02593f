/*
 * metrics.c - atomic counters and fixed-bucket histograms; rendering to
 * Prometheus text. HTTP counters live in a small fixed table of
 * (route, method, code) slots found by linear probing under no lock: slots are
 * claimed with compare-and-swap and never freed. HTTP latency histograms are
 * kept per route the same way.
 */
#include "server/metrics.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "server/backend.h"
#include "server/util.h"

static _Atomic int64_t counters[M__COUNT];

/* Seconds: 100us .. 10s. */
static const double bucket_s[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                  0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
#define NBUCKETS (sizeof(bucket_s) / sizeof(bucket_s[0]))

struct hist {
    _Atomic int64_t buckets[NBUCKETS + 1]; /* last = +Inf */
    _Atomic int64_t sum_us;
    _Atomic int64_t count;
};

static struct hist hists[H__COUNT];

/* lockd_lock_hold_seconds: locks are held from milliseconds to hours. */
static const double hold_s[] = {0.001, 0.01, 0.1, 0.5, 1,    5,    10,   30,
                                60,    120,  300, 600, 1800, 3600, 7200, 86400};
_Static_assert(sizeof(hold_s) == sizeof(bucket_s), "one bucket count for every histogram");

/* The bucket bounds of histogram id. */
static const double *bounds_of(enum hist_id id)
{
    return id == H_LOCK_HOLD ? hold_s : bucket_s;
}

void metrics_add(enum metric_id id, int64_t delta)
{
    atomic_fetch_add_explicit(&counters[id], delta, memory_order_relaxed);
}

int64_t metrics_get(enum metric_id id)
{
    return atomic_load_explicit(&counters[id], memory_order_relaxed);
}

static void hist_observe_in(struct hist *h, const double *bounds, int64_t usec)
{
    size_t i = 0;
    while (i < NBUCKETS && (double)usec > bounds[i] * 1e6)
        i++;
    atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, usec, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

static void hist_observe(struct hist *h, int64_t usec)
{
    hist_observe_in(h, bucket_s, usec);
}

void metrics_observe(enum hist_id id, int64_t usec)
{
    hist_observe_in(&hists[id], bounds_of(id), usec < 0 ? 0 : usec);
}

/* lockd_backend_request_duration_seconds{op}: a fixed set, one per op. */
static struct hist bk_hists[BK_OP_COUNT];
static const char *const bk_op_labels[BK_OP_COUNT] = {
    [BK_ACQUIRE] = "acquire",
    [BK_RENEW] = "renew",
    [BK_RELEASE] = "release",
    [BK_INSPECT] = "inspect",
    [BK_LIST] = "list",
    [BK_RENEW_MANY] = "renew_many",
    [BK_PING] = "ping",
    [BK_FORCE_RELEASE] = "force_release",
    [BK_ACQUIRE_MULTI] = "acquire_multi",
};

void metrics_backend_observe(unsigned op, int64_t usec)
{
    if (op < BK_OP_COUNT)
        hist_observe(&bk_hists[op], usec);
}

#define ROUTE_SLOTS 16
struct route_hist {
    _Atomic int state; /* 0 empty, 1 being claimed, 2 ready */
    char route[32];
    struct hist h;
};
static struct route_hist route_hists[ROUTE_SLOTS];

/* The histogram of route, claimed on first use; NULL when all slots are
 * taken (the route set is fixed and small, so this does not happen). */
static struct hist *route_hist(const char *route)
{
    for (size_t i = 0; i < ROUTE_SLOTS; i++) {
        struct route_hist *rh = &route_hists[i];
        int zero = 0;
        if (atomic_load(&rh->state) == 0 && atomic_compare_exchange_strong(&rh->state, &zero, 1)) {
            lk_strlcpy(rh->route, route, sizeof(rh->route));
            atomic_store(&rh->state, 2);
            return &rh->h;
        }
        while (atomic_load(&rh->state) == 1)
            ;
        if (strcmp(rh->route, route) == 0)
            return &rh->h;
    }
    return NULL;
}

void metrics_route(const char *route)
{
    (void)route_hist(route);
}

static _Atomic int64_t node_errors[METRICS_MAX_NODES];

void metrics_backend_error(size_t node)
{
    metrics_add(M_BACKEND_ERRORS, 1);
    if (node < METRICS_MAX_NODES)
        atomic_fetch_add_explicit(&node_errors[node], 1, memory_order_relaxed);
}

int64_t metrics_backend_errors(size_t node)
{
    return node < METRICS_MAX_NODES ? atomic_load_explicit(&node_errors[node], memory_order_relaxed)
                                    : 0;
}

#define HTTP_SLOTS 256
struct http_slot {
    _Atomic uint32_t key; /* 0 = empty; else hash claimed */
    char route[32];
    char method[8];
    int status;
    _Atomic int ready;
    _Atomic int64_t n;
};
static struct http_slot http_slots[HTTP_SLOTS];

static uint32_t hash3(const char *a, const char *b, int c)
{
    uint32_t h = 2166136261u;
    for (; *a; a++)
        h = (h ^ (unsigned char)*a) * 16777619u;
    for (; *b; b++)
        h = (h ^ (unsigned char)*b) * 16777619u;
    h = (h ^ (uint32_t)c) * 16777619u;
    return h ? h : 1;
}

static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"};

/* The counter of (route, method, status), claimed on first use; NULL when
 * the table is full. */
static struct http_slot *http_slot_of(const char *route, const char *method, int status)
{
    uint32_t h = hash3(route, method, status);
    for (size_t probe = 0; probe < HTTP_SLOTS; probe++) {
        struct http_slot *s = &http_slots[(h + probe) % HTTP_SLOTS];
        uint32_t k = atomic_load(&s->key);
        if (k == 0) {
            uint32_t zero = 0;
            if (atomic_compare_exchange_strong(&s->key, &zero, h)) {
                lk_strlcpy(s->route, route, sizeof(s->route));
                lk_strlcpy(s->method, method, sizeof(s->method));
                s->status = status;
                atomic_store(&s->ready, 1);
                return s;
            }
            k = atomic_load(&s->key);
        }
        if (k == h) {
            while (!atomic_load(&s->ready))
                ;
            if (s->status == status && strcmp(s->route, route) == 0 &&
                strcmp(s->method, method) == 0)
                return s;
        }
    }
    return NULL;
}

/* Per thread, the last (route, method, status) triples seen with their
 * histogram and counter: a hit skips the hashing and string compares. Route
 * labels are static strings (metrics.h) and methods are mapped to the
 * entries of methods[], so addresses identify both. */
#define HTTP_HITS 8
static _Thread_local struct {
    const char *route, *method;
    int status;
    struct hist *rh;
    struct http_slot *slot;
} http_hits[HTTP_HITS];
static _Thread_local unsigned http_hits_next;

void metrics_http(const char *route, const char *method, int status, int64_t usec)
{
    const char *m = "other";
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(method, methods[i]) == 0) {
            m = methods[i];
            break;
        }
    method = m;
    struct hist *rh = NULL;
    struct http_slot *slot = NULL;
    size_t i = 0;
    while (i < HTTP_HITS && !(http_hits[i].route == route && http_hits[i].method == method &&
                              http_hits[i].status == status))
        i++;
    if (i < HTTP_HITS) {
        rh = http_hits[i].rh;
        slot = http_hits[i].slot;
    } else {
        rh = route_hist(route);
        slot = http_slot_of(route, method, status);
        if (rh != NULL && slot != NULL) { /* both found for good: remember them */
            i = http_hits_next++ % HTTP_HITS;
            http_hits[i].route = route;
            http_hits[i].method = method;
            http_hits[i].status = status;
            http_hits[i].rh = rh;
            http_hits[i].slot = slot;
        }
    }
    if (rh != NULL)
        hist_observe(rh, usec);
    if (slot != NULL)
        atomic_fetch_add_explicit(&slot->n, 1, memory_order_relaxed);
}

struct sbuf {
    char *p;
    size_t len, cap;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)(n > 0 ? n : 0);
        b->p = lk_realloc(b->p, b->cap);
    }
}

static void render_counter(struct sbuf *b, const char *name, const char *help, const char *type)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's series; labels is "" or 'route="...",' (with the comma). */
static void render_series_in(struct sbuf *b, const struct hist *h, const double *bounds,
                             const char *name, const char *labels)
{
    int64_t cum = 0;
    for (size_t i = 0; i < NBUCKETS; i++) {
        cum += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        sb_printf(b, "%s_bucket{%sle=\"%g\"} %lld\n", name, labels, bounds[i], (long long)cum);
    }
    cum += atomic_load_explicit(&h->buckets[NBUCKETS], memory_order_relaxed);
    sb_printf(b, "%s_bucket{%sle=\"+Inf\"} %lld\n", name, labels, (long long)cum);
    size_t ll = strlen(labels);
    /* _sum and _count carry the labels without the trailing comma */
    sb_printf(b, "%s_sum%s%.*s%s %.6f\n", name, ll ? "{" : "", (int)(ll ? ll - 1 : 0), labels,
              ll ? "}" : "", (double)atomic_load_explicit(&h->sum_us, memory_order_relaxed) / 1e6);
    sb_printf(b, "%s_count%s%.*s%s %lld\n", name, ll ? "{" : "", (int)(ll ? ll - 1 : 0), labels,
              ll ? "}" : "", (long long)cum);
}

static void render_series(struct sbuf *b, const struct hist *h, const char *name,
                          const char *labels)
{
    render_series_in(b, h, bucket_s, name, labels);
}

static void render_hist(struct sbuf *b, enum hist_id id, const char *name, const char *help)
{
    render_counter(b, name, help, "histogram");
    render_series_in(b, &hists[id], bounds_of(id), name, "");
}

/* The process_* metrics as Prometheus' client libraries export them (the
 * Go client's process collector), read from /proc at scrape time only. A
 * file that cannot be read leaves its metrics out rather than lie. */
static void render_process(struct sbuf *b)
{
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    char stat[1024];
    size_t n = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f != NULL) {
        n = fread(stat, 1, sizeof(stat) - 1, f);
        fclose(f);
    }
    stat[n] = '\0';
    /* Fields after the command name, which may hold spaces and parentheses:
     * parse from the last ')'. state is field 3; utime 14, stime 15,
     * starttime 22, vsize 23, rss 24. */
    const char *p = strrchr(stat, ')');
    unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
    long long rss = 0;
    bool have_stat = p != NULL && ticks > 0 &&
                     sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                            "%*d %*d %llu %llu %lld",
                            &utime, &stime, &start, &vsize, &rss) == 5;
    if (have_stat) {
        render_counter(b, "process_cpu_seconds_total",
                       "Total user and system CPU time spent in seconds.", "counter");
        sb_printf(b, "process_cpu_seconds_total %.2f\n", (double)(utime + stime) / (double)ticks);
        render_counter(b, "process_resident_memory_bytes", "Resident memory size in bytes.",
                       "gauge");
        sb_printf(b, "process_resident_memory_bytes %lld\n", rss * (long long)page);
        render_counter(b, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge");
        sb_printf(b, "process_virtual_memory_bytes %llu\n", vsize);
    }
    /* Boot time (btime in /proc/stat) plus starttime, in clock ticks since boot. */
    unsigned long long btime = 0;
    f = have_stat ? fopen("/proc/stat", "r") : NULL;
    if (f != NULL) {
        char line[256];
        while (fgets(line, sizeof(line), f) != NULL)
            if (sscanf(line, "btime %llu", &btime) == 1)
                break;
        fclose(f);
    }
    if (btime > 0) {
        render_counter(b, "process_start_time_seconds",
                       "Start time of the process since unix epoch in seconds.", "gauge");
        sb_printf(b, "process_start_time_seconds %.2f\n",
                  (double)btime + (double)start / (double)ticks);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        long fds = 0;
        const struct dirent *de;
        while ((de = readdir(d)) != NULL)
            fds += de->d_name[0] != '.';
        closedir(d);
        render_counter(b, "process_open_fds", "Number of open file descriptors.", "gauge");
        sb_printf(b, "process_open_fds %ld\n", fds - 1); /* less the directory's own */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        render_counter(b, "process_max_fds", "Maximum number of open file descriptors.", "gauge");
        sb_printf(b, "process_max_fds %.0f\n",
                  rl.rlim_cur == RLIM_INFINITY ? 1.8446744073709552e19 : (double)rl.rlim_cur);
    }
}

char *metrics_render(const char *extra, size_t *len)
{
    struct sbuf b = {lk_malloc(8192), 0, 8192};
    b.p[0] = '\0';
    render_counter(&b, "lockd_http_requests_total", "HTTP requests by route, method and status.",
                   "counter");
    for (size_t i = 0; i < HTTP_SLOTS; i++) {
        struct http_slot *s = &http_slots[i];
        if (atomic_load(&s->key) == 0 || !atomic_load(&s->ready))
            continue;
        sb_printf(&b, "lockd_http_requests_total{route=\"%s\",method=\"%s\",code=\"%d\"} %lld\n",
                  s->route, s->method, s->status,
                  (long long)atomic_load_explicit(&s->n, memory_order_relaxed));
    }
    render_counter(&b, "lockd_http_request_duration_seconds", "HTTP request latency by route.",
                   "histogram");
    for (size_t i = 0; i < ROUTE_SLOTS; i++) {
        struct route_hist *rh = &route_hists[i];
        if (atomic_load(&rh->state) != 2)
            continue;
        char labels[48];
        snprintf(labels, sizeof(labels), "route=\"%s\",", rh->route);
        render_series(&b, &rh->h, "lockd_http_request_duration_seconds", labels);
    }
    static const struct {
        const char *name, *help, *label;
        enum metric_id ids[3];
        const char *vals[3];
    } fams[] = {
        {"lockd_acquire_total",
         "Acquire attempts by result.",
         "result",
         {M_ACQUIRE_GRANTED, M_ACQUIRE_LOCKED, M_ACQUIRE_ERROR},
         {"granted", "locked", "error"}},
        {"lockd_grants_total",
         "Granted acquires by mode (semaphore: limit > 1).",
         "mode",
         {M_GRANT_EXCLUSIVE, M_GRANT_SHARED, M_GRANT_SEMAPHORE},
         {"exclusive", "shared", "semaphore"}},
        {"lockd_release_total",
         "Releases by result.",
         "result",
         {M_RELEASE_OK, M_RELEASE_NOT_HELD, M_RELEASE_ERROR},
         {"released", "not_held", "error"}},
        {"lockd_renew_total",
         "Client renewals by result.",
         "result",
         {M_RENEW_OK, M_RENEW_NOT_HELD, M_RENEW_ERROR},
         {"renewed", "not_held", "error"}},
        {"lockd_watchdog_renewals_total",
         "Watchdog renewals by result.",
         "result",
         {M_WATCHDOG_OK, M_WATCHDOG_LOST, M_WATCHDOG_ERROR},
         {"renewed", "lost", "error"}},
    };
    for (size_t f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
        render_counter(&b, fams[f].name, fams[f].help, "counter");
        for (int j = 0; j < 3; j++)
            sb_printf(&b, "%s{%s=\"%s\"} %lld\n", fams[f].name, fams[f].label, fams[f].vals[j],
                      (long long)metrics_get(fams[f].ids[j]));
    }
    static const struct {
        const char *name, *help, *type;
        enum metric_id id;
    } singles[] = {
        {"lockd_leases_lost_total", "Session leases the watchdog found lost.", "counter",
         M_LEASES_LOST},
        {"lockd_sessions_expired_total", "Sessions expired by the reaper.", "counter",
         M_SESSIONS_EXPIRED},
        {"lockd_forced_releases_total", "Locks an operator force-unlocked.", "counter",
         M_FORCED_RELEASES},
        {"lockd_sessions", "Live sessions.", "gauge", M_SESSIONS},
        {"lockd_waiters", "Blocked acquires queued in this lockd.", "gauge", M_WAITERS},
    };
    for (size_t i = 0; i < sizeof(singles) / sizeof(singles[0]); i++) {
        render_counter(&b, singles[i].name, singles[i].help, singles[i].type);
        sb_printf(&b, "%s %lld\n", singles[i].name, (long long)metrics_get(singles[i].id));
    }
    render_counter(&b, "lockd_cluster_redirections_total",
                   "Cluster: MOVED and ASK redirections followed.", "counter");
    sb_printf(&b, "lockd_cluster_redirections_total{kind=\"moved\"} %lld\n",
              (long long)metrics_get(M_CLUSTER_MOVED));
    sb_printf(&b, "lockd_cluster_redirections_total{kind=\"ask\"} %lld\n",
              (long long)metrics_get(M_CLUSTER_ASK));
    render_counter(&b, "lockd_locks_held",
                   "Locks this lockd granted and has not seen released or expired, by whether "
                   "a session holds them.",
                   "gauge");
    sb_printf(&b, "lockd_locks_held{session_bound=\"true\"} %lld\n",
              (long long)metrics_get(M_LOCKS_HELD));
    sb_printf(&b, "lockd_locks_held{session_bound=\"false\"} %lld\n",
              (long long)metrics_get(M_LOCKS_HELD_PLAIN));
    render_counter(&b, "lockd_backend_request_duration_seconds",
                   "Backend call latency by operation.", "histogram");
    for (size_t i = 0; i < BK_OP_COUNT; i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "op=\"%s\",", bk_op_labels[i]);
        render_series(&b, &bk_hists[i], "lockd_backend_request_duration_seconds", labels);
    }
    render_hist(&b, H_ACQUIRE_WAIT, "lockd_acquire_wait_seconds",
                "How long granted blocking acquires waited for their lock.");
    render_hist(&b, H_LOCK_HOLD, "lockd_lock_hold_seconds",
                "How long locks granted here were held, from grant to release.");
    render_hist(&b, H_HANDOFF, "lockd_handoff_seconds",
                "Time from a release to the next waiter's grant in this lockd.");
    render_process(&b);
    if (extra != NULL)
        sb_printf(&b, "%s", extra);
    *len = b.len;
    return b.p;
}
