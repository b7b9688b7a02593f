/*
 * loadgen.c - lockd's own HTTP/1.1 load generator for bench/run.sh: epoll,
 * keep-alive connections, N concurrent clients spread over T threads, bounded
 * by time and by a request cap, 127.0.0.1 only. Not a test and not part of
 * lockd. Prints one machine-readable "RESULT key=value ..." line per run.
 *
 * Modes:
 *   pairs      acquire (POST /locks/bench-<rand>) then release (DELETE + Lock-Lease);
 *              with --names N on N names <name>-<i> with wait_ms, --shared_pct P
 *              of the acquires in mode shared, --limit L a semaphore of L
 *   single     pairs with one client (acquire latency)
 *   contended  every client on one name with wait_ms; handoff latency
 *   http       plain GET or POST of --path (the nginx ceiling)
 *   etcd       lease grant + /v3/lock/lock + /v3/lock/unlock through etcd's gateway
 *   etcd-contended  the same on one name (etcd's lock blocks until granted)
 *   hold       acquire --max leases on distinct names and keep them (RSS)
 *   waiters    one client holds --name, every other one waits on it (RSS)
 *   watchers   one client holds --name and reads its index, every other one
 *              watches it (GET ?index=N&wait_ms=M); on SIGUSR1 the holder
 *              releases and watch_* is each watcher's answer after the release
 *              was sent (watch_max_us: the last of them)
 *
 * Latencies go to log-linear histograms (HdrHistogram-style: 128 linear
 * sub-buckets per power of two, < 1% error), never an average.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- histogram */

#define H_SUB_BITS 7
#define H_SUB (1u << H_SUB_BITS) /* 128 */
#define H_MAX_EXP 42             /* 2^42 ns ~ 73 minutes */
#define H_BUCKETS (H_SUB * 2 + (H_MAX_EXP - H_SUB_BITS - 1) * H_SUB)

struct hist {
    uint64_t count;
    uint64_t min_ns;
    uint64_t max_ns;
    uint64_t b[H_BUCKETS];
};

static unsigned hist_index(uint64_t v)
{
    if (v < 2 * H_SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= H_SUB_BITS + 1 */
    if (e >= H_MAX_EXP)
        return H_BUCKETS - 1;
    unsigned shift = e - H_SUB_BITS;
    unsigned top = (unsigned)(v >> shift); /* in [H_SUB, 2*H_SUB) */
    return 2 * H_SUB + (e - H_SUB_BITS - 1) * H_SUB + (top - H_SUB);
}

/* Middle of bucket i, in ns. */
static double hist_value(unsigned i)
{
    if (i < 2 * H_SUB)
        return (double)i;
    unsigned k = i - 2 * H_SUB;
    unsigned e = k / H_SUB + H_SUB_BITS + 1;
    unsigned top = k % H_SUB + H_SUB;
    unsigned shift = e - H_SUB_BITS;
    double lo = (double)((uint64_t)top << shift);
    return lo + (double)(1ull << shift) / 2.0;
}

static void hist_add(struct hist *h, uint64_t ns)
{
    if (h->count == 0 || ns < h->min_ns)
        h->min_ns = ns;
    if (ns > h->max_ns)
        h->max_ns = ns;
    h->count++;
    h->b[hist_index(ns)]++;
}

static void hist_merge(struct hist *into, const struct hist *h)
{
    if (h->count == 0)
        return;
    if (into->count == 0 || h->min_ns < into->min_ns)
        into->min_ns = h->min_ns;
    if (h->max_ns > into->max_ns)
        into->max_ns = h->max_ns;
    into->count += h->count;
    for (unsigned i = 0; i < H_BUCKETS; i++)
        into->b[i] += h->b[i];
}

/* Value at quantile q (0..1), in microseconds. */
static double hist_quantile_us(const struct hist *h, double q)
{
    if (h->count == 0)
        return 0.0;
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.5);
    if (rank < 1)
        rank = 1;
    if (rank > h->count)
        rank = h->count;
    uint64_t seen = 0;
    for (unsigned i = 0; i < H_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            double v = hist_value(i);
            if (v > (double)h->max_ns)
                v = (double)h->max_ns;
            if (v < (double)h->min_ns)
                v = (double)h->min_ns;
            return v / 1000.0;
        }
    }
    return (double)h->max_ns / 1000.0;
}

static void hist_print(FILE *f, const char *prefix, const struct hist *h)
{
    if (h->count == 0)
        return;
    fprintf(f,
            " %s_n=%" PRIu64 " %s_p50_us=%.1f %s_p90_us=%.1f %s_p99_us=%.1f %s_p999_us=%.1f"
            " %s_max_us=%.1f",
            prefix, h->count, prefix, hist_quantile_us(h, 0.50), prefix, hist_quantile_us(h, 0.90),
            prefix, hist_quantile_us(h, 0.99), prefix, hist_quantile_us(h, 0.999), prefix,
            (double)h->max_ns / 1000.0);
}

/* ---------------------------------------------------------------- options */

enum mode {
    M_PAIRS,
    M_SINGLE,
    M_CONTENDED,
    M_HTTP,
    M_ETCD,
    M_ETCD_CONTENDED,
    M_HOLD,
    M_WAITERS,
    M_WATCHERS
};

static const char *const mode_names[] = {"pairs",          "single", "contended", "http",    "etcd",
                                         "etcd-contended", "hold",   "waiters",   "watchers"};

static struct {
    enum mode mode;
    int port;
    int port2; /* contended: odd clients go to this second lockd */
    int clients;
    int threads;
    double secs;
    uint64_t max_ops; /* 0 = unbounded (time only) */
    const char *path;
    const char *method;
    const char *body;
    const char *name;
    const char *label;
    const char *ready_file;
    int64_t ttl_ms;
    int64_t wait_ms;
    int64_t hold_us;
    int names;      /* pairs: 0 = a fresh name per pair, else one of N, waiting */
    int shared_pct; /* pairs: this many % of acquires are mode shared */
    int64_t limit;  /* pairs: 0 = none sent, else a semaphore of this limit */
    bool etcd_lease_per_client;
} opt = {
    .mode = M_PAIRS,
    .port = 0,
    .clients = 64,
    .threads = 1,
    .secs = 10.0,
    .path = "/",
    .method = "GET",
    .body = "",
    .name = "bench-contended",
    .label = "",
    .ttl_ms = 30000,
    .wait_ms = 60000,
};

/* ---------------------------------------------------------------- shared state */

static atomic_bool g_stop;              /* no new requests after this */
static atomic_uint_fast64_t g_ops;      /* completed operations, for --max */
static atomic_int g_connected;          /* waiters mode: requests sent */
static volatile sig_atomic_t g_release; /* watchers: SIGUSR1 asks the holder to release */
static bool g_released;                 /* watchers: the release is sent (one thread) */
static uint64_t g_rel_sent_ns;          /* watchers: when */
static char g_watch_index[32];          /* watchers: the name's index while held */
static uint64_t g_t0_ns, g_deadline_ns;

/* Contended handoff bookkeeping. Grants and releases of one name alternate:
 * release k is followed by grant k+1, whose answer may overtake release k's
 * own answer. One slot per release; contended modes run on one thread (the
 * mode forces threads = 1), so plain variables are enough. */
struct handoff {
    uint64_t sent_ns, done_ns, grant_ns;
    bool has_done, has_grant;
    bool cross; /* releaser and next holder on different lockd processes */
};
#define HO_RING 1024
static struct handoff g_ho[HO_RING];
static uint64_t g_rel_seq;     /* releases sent so far */
static uint64_t g_granted_seq; /* the last release whose successor was granted */
static int g_last_holder = -1; /* client id of the last grant */
static uint64_t g_regrants;    /* grants to the client that held the lock just before */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- connections */

enum step {
    S_CONNECTING,
    S_GRANT,
    S_LOCK,
    S_ACQUIRE,
    S_RELEASE,
    S_UNLOCK,
    S_HTTP,
    S_PARKED,
    S_INSPECT,
    S_WATCH
};

struct conn {
    int fd;
    int id;
    enum step step;
    bool want_out;
    char out[1024];
    size_t out_len, out_off;
    char *in;
    size_t in_len, in_cap;
    char *body; /* de-chunked body of the current response */
    size_t body_cap;
    uint64_t t_req_ns;  /* current request sent */
    uint64_t t_pair_ns; /* current pair started */
    char name[300];
    char lease[80];      /* lockd lease */
    char etcd_lease[32]; /* etcd lease id, decimal */
    char etcd_key[512];  /* etcd lock key, base64 */
    uint64_t rnd;
    uint64_t rel_id; /* contended: sequence number of this client's release */
};

struct worker {
    pthread_t tid;
    int idx;
    int epfd;
    struct conn *conns;
    int nconns;
    int first_id;
    int active; /* connections still open and not finished */
    /* results */
    uint64_t ops, reqs, errors, timeouts, conn_errors, status_other;
    struct hist req, acq, rel, pair, handoff, handoff_send;
    struct hist handoff_cross; /* --port2: the releaser was on the other lockd */
    struct hist watch;         /* watchers: release sent -> this watcher answered */
};

struct response {
    int status;
    const char *body;
    size_t body_len;
    char lease[80];
    char index[32]; /* Lock-Index */
    bool close;
};

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

static void b64(const char *in, size_t n, char *out, size_t cap)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (uint32_t)(unsigned char)in[i + 2];
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

static void ep_mod(struct worker *w, struct conn *c, bool want_out)
{
    if (c->want_out == want_out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want_out;
}

static int conn_open(struct worker *w, struct conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        perror("loadgen: socket");
        return -1;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int port = opt.port2 > 0 && (c->id % 2) == 1 ? opt.port2 : opt.port;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* 127.0.0.1 only, by construction */
    c->in_len = 0;
    c->out_len = c->out_off = 0;
    c->step = S_CONNECTING;
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
        perror("loadgen: connect");
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    c->want_out = true;
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        perror("loadgen: epoll_ctl");
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

static void conn_close(struct worker *w, struct conn *c)
{
    if (c->fd >= 0) {
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
}

/* Formats a request into c->out; the body may be NULL. */
static void req_build(struct conn *c, const char *method, const char *path, const char *extra_hdr,
                      const char *body)
{
    size_t bl = body ? strlen(body) : 0;
    int n;
    if (body)
        n = snprintf(c->out, sizeof c->out,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, extra_hdr, bl, body);
    else
        n = snprintf(c->out, sizeof c->out, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", method,
                     path, extra_hdr);
    if (n < 0 || (size_t)n >= sizeof c->out) {
        fprintf(stderr, "loadgen: request too long\n");
        exit(2);
    }
    c->out_len = (size_t)n;
    c->out_off = 0;
}

static void conn_flush(struct worker *w, struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                ep_mod(w, c, true);
                return;
            }
            if (errno == EINTR)
                continue;
            w->conn_errors++;
            conn_close(w, c);
            return;
        }
        c->out_off += (size_t)n;
    }
    ep_mod(w, c, false);
}

static void send_request(struct worker *w, struct conn *c)
{
    c->t_req_ns = now_ns();
    conn_flush(w, c);
}

static bool op_budget_left(void)
{
    if (atomic_load_explicit(&g_stop, memory_order_relaxed))
        return false;
    if (opt.max_ops && atomic_load_explicit(&g_ops, memory_order_relaxed) >= opt.max_ops) {
        atomic_store(&g_stop, true);
        return false;
    }
    return true;
}

static void op_done(struct worker *w)
{
    w->ops++;
    atomic_fetch_add_explicit(&g_ops, 1, memory_order_relaxed);
}

/* c is done for this run (its budget spent, a waiter answered early, a
 * watcher's wait over): parked, no longer active, closed. */
static void conn_park(struct worker *w, struct conn *c)
{
    c->step = S_PARKED;
    w->active--;
    conn_close(w, c);
}

/* Chooses and sends the request that starts the next cycle, or parks/finishes. */
static void start_cycle(struct worker *w, struct conn *c)
{
    char path[400];
    char body[512];
    if (!op_budget_left()) {
        conn_park(w, c);
        return;
    }
    c->t_pair_ns = now_ns();
    switch (opt.mode) {
    case M_PAIRS:
    case M_SINGLE:
    case M_HOLD:
        if (opt.mode == M_HOLD)
            snprintf(c->name, sizeof c->name, "bench-hold-%d-%" PRIu64, c->id, w->ops);
        else if (opt.names > 0)
            snprintf(c->name, sizeof c->name, "%s-%d", opt.name,
                     (int)(xorshift(&c->rnd) % (uint64_t)opt.names));
        else
            snprintf(c->name, sizeof c->name, "bench-%016" PRIx64, xorshift(&c->rnd));
        snprintf(path, sizeof path, "/locks/%s", c->name);
        if (opt.mode == M_PAIRS && (opt.names > 0 || opt.shared_pct > 0 || opt.limit > 0)) {
            bool shared = (int)(xorshift(&c->rnd) % 100) < opt.shared_pct;
            char lim[32] = "";
            if (opt.limit > 0)
                snprintf(lim, sizeof lim, ",\"limit\":%" PRId64, opt.limit);
            snprintf(body, sizeof body,
                     "{\"ttl_ms\":%" PRId64 ",\"wait_ms\":%" PRId64 ",\"mode\":\"%s\"%s}",
                     opt.ttl_ms, opt.names > 0 ? opt.wait_ms : 0, shared ? "shared" : "exclusive",
                     lim);
        } else {
            snprintf(body, sizeof body, "{\"ttl_ms\":%" PRId64 "}", opt.ttl_ms);
        }
        req_build(c, "POST", path, "", body);
        c->step = S_ACQUIRE;
        break;
    case M_WATCHERS:
        if (c->id != 0) {
            snprintf(path, sizeof path, "/locks/%s?index=%s&wait_ms=%" PRId64, opt.name,
                     g_watch_index, opt.wait_ms);
            req_build(c, "GET", path, "", NULL);
            c->step = S_WATCH;
            break;
        }
        /* the holder acquires like the waiters' holder */
        /* fall through */
    case M_CONTENDED:
    case M_WAITERS:
        snprintf(c->name, sizeof c->name, "%s", opt.name);
        snprintf(path, sizeof path, "/locks/%s", c->name);
        if ((opt.mode == M_WAITERS || opt.mode == M_WATCHERS) && c->id == 0)
            snprintf(body, sizeof body, "{\"ttl_ms\":%" PRId64 "}", opt.ttl_ms);
        else
            snprintf(body, sizeof body, "{\"ttl_ms\":%" PRId64 ",\"wait_ms\":%" PRId64 "}",
                     opt.ttl_ms, opt.wait_ms);
        req_build(c, "POST", path, "", body);
        c->step = S_ACQUIRE;
        break;
    case M_HTTP:
        req_build(c, opt.method, opt.path, "", strcmp(opt.method, "GET") ? opt.body : NULL);
        c->step = S_HTTP;
        break;
    case M_ETCD:
    case M_ETCD_CONTENDED:
        if (opt.mode == M_ETCD)
            snprintf(c->name, sizeof c->name, "bench-%016" PRIx64, xorshift(&c->rnd));
        else
            snprintf(c->name, sizeof c->name, "%s", opt.name);
        if (c->etcd_lease[0] == '\0' || !opt.etcd_lease_per_client) {
            snprintf(body, sizeof body, "{\"TTL\":%" PRId64 "}", (opt.ttl_ms + 999) / 1000);
            req_build(c, "POST", "/v3/lease/grant", "", body);
            c->step = S_GRANT;
        } else {
            char nb[420];
            b64(c->name, strlen(c->name), nb, sizeof nb);
            snprintf(body, sizeof body, "{\"name\":\"%s\",\"lease\":\"%s\"}", nb, c->etcd_lease);
            req_build(c, "POST", "/v3/lock/lock", "", body);
            c->step = S_LOCK;
        }
        break;
    }
    send_request(w, c);
    if ((opt.mode == M_WAITERS || opt.mode == M_WATCHERS) && c->id != 0)
        atomic_fetch_add(&g_connected, 1);
}

/* Finds "key":"value" in a JSON body (flat enough for etcd's answers). */
static bool json_str(const char *body, size_t len, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = memmem(body, len, pat, strlen(pat));
    if (!p)
        return false;
    p += strlen(pat);
    const char *end = memchr(p, '"', len - (size_t)(p - body));
    if (!end || (size_t)(end - p) >= cap)
        return false;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return true;
}

static void handoff_finish(struct worker *w, const struct handoff *h)
{
    /* release answered -> next grant received; 0 when the grant came first */
    uint64_t v = h->grant_ns > h->done_ns ? h->grant_ns - h->done_ns : 0;
    hist_add(&w->handoff, v);
    if (h->cross)
        hist_add(&w->handoff_cross, v);
}

static void record_grant(struct worker *w, const struct conn *c, uint64_t t)
{
    if (c->id == g_last_holder)
        g_regrants++; /* the releaser won again: no fairness */
    bool cross = opt.port2 > 0 && g_last_holder >= 0 && (c->id % 2) != (g_last_holder % 2);
    g_last_holder = c->id;
    if (g_rel_seq == g_granted_seq)
        return; /* first grant of the run, nobody released before it */
    g_granted_seq = g_rel_seq;
    struct handoff *h = &g_ho[g_rel_seq % HO_RING];
    h->grant_ns = t;
    h->has_grant = true;
    h->cross = cross;
    hist_add(&w->handoff_send, t - h->sent_ns);
    if (h->has_done)
        handoff_finish(w, h);
}

static void record_release_sent(struct conn *c, uint64_t t)
{
    c->rel_id = ++g_rel_seq;
    struct handoff *h = &g_ho[c->rel_id % HO_RING];
    memset(h, 0, sizeof *h);
    h->sent_ns = t;
}

static void record_release_done(struct worker *w, struct conn *c, uint64_t t)
{
    struct handoff *h = &g_ho[c->rel_id % HO_RING];
    h->done_ns = t;
    h->has_done = true;
    if (h->has_grant)
        handoff_finish(w, h);
}

/* A release (lockd's DELETE, etcd's unlock) answered at t, lat after it
 * was sent: its latency and the acquire-release pair's, the hand-off's end
 * when contended; one operation done, the next cycle. */
static void release_done(struct worker *w, struct conn *c, uint64_t t, uint64_t lat, bool contended)
{
    hist_add(&w->rel, lat);
    hist_add(&w->pair, t - c->t_pair_ns);
    if (contended)
        record_release_done(w, c, t);
    op_done(w);
    start_cycle(w, c);
}

/* An etcd step (what: "lease grant", "lock") answered r without what the
 * next step needs: an error (said for the first few), and a new cycle
 * with a new lease. */
static void etcd_retry(struct worker *w, struct conn *c, const char *what, const struct response *r)
{
    w->errors++;
    if (w->errors < 5)
        fprintf(stderr, "loadgen: %s answered %d: %.*s\n", what, r->status,
                (int)(r->body_len > 200 ? 200 : r->body_len), r->body ? r->body : "");
    c->etcd_lease[0] = '\0';
    start_cycle(w, c);
}

/* Handles one complete response on c. */
static void on_response(struct worker *w, struct conn *c, const struct response *r)
{
    uint64_t t = now_ns();
    uint64_t lat = t - c->t_req_ns;
    char path[400];
    char hdr[160];
    char body[700];
    w->reqs++;
    hist_add(&w->req, lat);
    bool contended = opt.mode == M_CONTENDED || opt.mode == M_ETCD_CONTENDED;

    switch (c->step) {
    case S_HTTP:
        if (r->status != 200)
            w->errors++;
        op_done(w);
        start_cycle(w, c);
        return;
    case S_ACQUIRE:
        if (opt.mode == M_WAITERS && r->status != 200) {
            /* a waiter answered early (timeout, draining lockd): count it, do
             * not retry, so the number of waiters only goes down */
            if (r->status == 409)
                w->timeouts++;
            else
                w->errors++;
            conn_park(w, c);
            return;
        }
        if (r->status == 409) {
            w->timeouts++;
            start_cycle(w, c);
            return;
        }
        if (r->status != 200 || r->lease[0] == '\0') {
            if (r->status != 200)
                w->status_other++;
            w->errors++;
            if (w->errors < 5)
                fprintf(stderr, "loadgen: acquire answered %d: %.*s\n", r->status,
                        (int)(r->body_len > 200 ? 200 : r->body_len), r->body ? r->body : "");
            start_cycle(w, c);
            return;
        }
        hist_add(&w->acq, lat);
        if (contended)
            record_grant(w, c, t);
        if (opt.mode == M_HOLD) {
            op_done(w);
            start_cycle(w, c);
            return;
        }
        if (opt.mode == M_WAITERS) {
            /* the holder keeps the lock; any grant to a waiter is unexpected */
            c->step = S_PARKED;
            return;
        }
        if (opt.mode == M_WATCHERS) {
            /* the holder reads the index the watchers will wait on */
            snprintf(c->lease, sizeof c->lease, "%s", r->lease);
            snprintf(path, sizeof path, "/locks/%s", c->name);
            req_build(c, "GET", path, "", NULL);
            c->step = S_INSPECT;
            send_request(w, c);
            return;
        }
        snprintf(c->lease, sizeof c->lease, "%s", r->lease);
        if (opt.hold_us > 0) {
            struct timespec ts = {.tv_sec = opt.hold_us / 1000000,
                                  .tv_nsec = (opt.hold_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        snprintf(path, sizeof path, "/locks/%s", c->name);
        snprintf(hdr, sizeof hdr, "Lock-Lease: %s\r\n", c->lease);
        req_build(c, "DELETE", path, hdr, NULL);
        c->step = S_RELEASE;
        send_request(w, c);
        if (contended)
            record_release_sent(c, c->t_req_ns);
        return;
    case S_INSPECT:
        if (r->status != 200 || r->index[0] == '\0') {
            fprintf(stderr, "loadgen: inspect answered %d without Lock-Index\n", r->status);
            w->errors++;
            conn_park(w, c);
            atomic_store(&g_stop, true);
            return;
        }
        snprintf(g_watch_index, sizeof g_watch_index, "%s", r->index);
        c->step = S_PARKED; /* the worker loop now opens every watcher */
        return;
    case S_WATCH:
        /* 200 after the release: woken; before it: wait_ms ran out (a timeout) */
        if ((r->status != 200 || !g_released) && w->errors + w->timeouts < 3)
            fprintf(stderr, "loadgen: watch answered %d%s: %.*s\n", r->status,
                    g_released ? "" : " before the release",
                    (int)(r->body_len > 200 ? 200 : r->body_len), r->body ? r->body : "");
        if (r->status != 200)
            w->errors++;
        else if (!g_released)
            w->timeouts++;
        else if (!memmem(r->body, r->body_len, "\"held\":false", 12) &&
                 !memmem(r->body, r->body_len, "\"held\": false", 13)) {
            if (w->errors < 3) /* woken, but not told the name is free */
                fprintf(stderr, "loadgen: watch answered after the release: %.*s\n",
                        (int)(r->body_len > 200 ? 200 : r->body_len), r->body ? r->body : "");
            w->errors++;
        } else {
            hist_add(&w->watch, t - g_rel_sent_ns);
            op_done(w);
        }
        conn_park(w, c);
        return;
    case S_RELEASE:
        if (opt.mode == M_WATCHERS) {
            if (r->status != 200)
                w->errors++;
            hist_add(&w->rel, lat);
            conn_park(w, c);
            return;
        }
        if (r->status != 200) {
            w->errors++;
            if (w->errors < 5)
                fprintf(stderr, "loadgen: release answered %d\n", r->status);
        }
        release_done(w, c, t, lat, contended);
        return;
    case S_GRANT:
        if (r->status != 200 ||
            !json_str(r->body, r->body_len, "ID", c->etcd_lease, sizeof c->etcd_lease)) {
            etcd_retry(w, c, "lease grant", r);
            return;
        }
        {
            char nb[420];
            b64(c->name, strlen(c->name), nb, sizeof nb);
            snprintf(body, sizeof body, "{\"name\":\"%s\",\"lease\":\"%s\"}", nb, c->etcd_lease);
        }
        req_build(c, "POST", "/v3/lock/lock", "", body);
        c->step = S_LOCK;
        send_request(w, c);
        return;
    case S_LOCK:
        if (r->status != 200 ||
            !json_str(r->body, r->body_len, "key", c->etcd_key, sizeof c->etcd_key)) {
            etcd_retry(w, c, "lock", r);
            return;
        }
        hist_add(&w->acq, lat);
        if (contended)
            record_grant(w, c, t);
        snprintf(body, sizeof body, "{\"key\":\"%s\"}", c->etcd_key);
        req_build(c, "POST", "/v3/lock/unlock", "", body);
        c->step = S_UNLOCK;
        send_request(w, c);
        if (contended)
            record_release_sent(c, c->t_req_ns);
        return;
    case S_UNLOCK:
        if (r->status != 200)
            w->errors++;
        release_done(w, c, t, lat, contended);
        return;
    case S_CONNECTING:
    case S_PARKED: w->errors++; return;
    }
}

/* Parses as many complete responses as c->in holds. Returns -1 on a protocol
 * error (the connection is then closed). */
static int parse_responses(struct worker *w, struct conn *c)
{
    for (;;) {
        char *buf = c->in;
        size_t len = c->in_len;
        char *hend = memmem(buf, len, "\r\n\r\n", 4);
        if (!hend)
            return 0;
        size_t hlen = (size_t)(hend - buf) + 4;
        struct response r = {.status = 0};
        if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0)
            return -1;
        r.status = atoi(buf + 9);
        long long clen = -1;
        bool chunked = false;
        /* headers */
        char *p = memchr(buf, '\n', hlen);
        while (p && p + 1 < hend) {
            char *line = p + 1;
            char *eol = memchr(line, '\r', (size_t)(hend + 2 - line));
            if (!eol)
                break;
            size_t ll = (size_t)(eol - line);
            if (ll > 15 && strncasecmp(line, "Content-Length:", 15) == 0)
                clen = atoll(line + 15);
            else if (ll > 18 && strncasecmp(line, "Transfer-Encoding:", 18) == 0)
                chunked = memmem(line, ll, "chunked", 7) != NULL;
            else if (ll > 11 && strncasecmp(line, "Lock-Lease:", 11) == 0) {
                const char *v = line + 11;
                while (*v == ' ')
                    v++;
                size_t vl = (size_t)(eol - v);
                if (vl < sizeof r.lease) {
                    memcpy(r.lease, v, vl);
                    r.lease[vl] = '\0';
                }
            } else if (ll > 11 && strncasecmp(line, "Lock-Index:", 11) == 0) {
                const char *v = line + 11;
                while (*v == ' ')
                    v++;
                size_t vl = (size_t)(eol - v);
                if (vl < sizeof r.index) {
                    memcpy(r.index, v, vl);
                    r.index[vl] = '\0';
                }
            } else if (ll > 11 && strncasecmp(line, "Connection:", 11) == 0)
                r.close = memmem(line, ll, "close", 5) != NULL;
            p = eol + 1;
        }
        size_t total;
        if (chunked) {
            /* first make sure the whole message is here, then copy the chunk
             * data into c->body (the input buffer stays untouched) */
            size_t rd = hlen;
            size_t blen = 0;
            bool complete = false;
            total = 0;
            while (rd < len) {
                char *crlf = memmem(buf + rd, len - rd, "\r\n", 2);
                if (!crlf)
                    break;
                unsigned long sz = strtoul(buf + rd, NULL, 16);
                size_t data = (size_t)(crlf - buf) + 2;
                if (sz == 0) {
                    char *fin = memmem(buf + rd, len - rd, "\r\n\r\n", 4);
                    if (fin) {
                        total = (size_t)(fin - buf) + 4;
                        complete = true;
                    }
                    break;
                }
                if (data + sz + 2 > len)
                    break;
                blen += sz;
                rd = data + sz + 2;
            }
            if (!complete)
                return 0;
            if (blen + 1 > c->body_cap) {
                c->body_cap = blen + 1;
                c->body = realloc(c->body, c->body_cap);
                if (!c->body)
                    abort();
            }
            rd = hlen;
            size_t wr = 0;
            for (;;) {
                char *crlf = memmem(buf + rd, len - rd, "\r\n", 2);
                unsigned long sz = strtoul(buf + rd, NULL, 16);
                size_t data = (size_t)(crlf - buf) + 2;
                if (sz == 0)
                    break;
                memcpy(c->body + wr, buf + data, sz);
                wr += sz;
                rd = data + sz + 2;
            }
            c->body[wr] = '\0';
            r.body = c->body;
            r.body_len = wr;
        } else {
            if (clen < 0)
                clen = 0; /* responses we expect always carry a length */
            if (len < hlen + (size_t)clen)
                return 0;
            total = hlen + (size_t)clen;
            r.body = buf + hlen;
            r.body_len = (size_t)clen;
        }
        on_response(w, c, &r);
        if (c->fd < 0)
            return 0;
        memmove(c->in, c->in + total, c->in_len - total);
        c->in_len -= total;
        if (r.close) {
            conn_close(w, c);
            if (c->step != S_PARKED) {
                if (conn_open(w, c) < 0) {
                    w->active--;
                    c->step = S_PARKED;
                }
            }
            return 0;
        }
    }
}

static void on_readable(struct worker *w, struct conn *c)
{
    for (;;) {
        if (c->in_cap - c->in_len < 4096) {
            if (c->in_cap >= (1u << 20)) {
                w->conn_errors++;
                conn_close(w, c);
                return;
            }
            c->in_cap *= 2;
            c->in = realloc(c->in, c->in_cap);
            if (!c->in)
                abort();
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len - 1, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == EINTR)
                continue;
            n = 0;
        }
        if (n == 0) {
            /* peer closed: reconnect unless we are done */
            bool was_parked = c->step == S_PARKED;
            conn_close(w, c);
            if (!was_parked) {
                w->conn_errors++;
                if (op_budget_left() && conn_open(w, c) == 0)
                    return;
                w->active--;
                c->step = S_PARKED;
            }
            return;
        }
        c->in_len += (size_t)n;
        if (parse_responses(w, c) < 0) {
            w->conn_errors++;
            conn_close(w, c);
            w->active--;
            c->step = S_PARKED;
            return;
        }
        if (c->fd < 0)
            return;
        if ((size_t)n < 4096)
            break;
    }
}

static void on_event(struct worker *w, struct conn *c, uint32_t ev)
{
    if (c->step == S_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err != 0 || (ev & (EPOLLERR | EPOLLHUP))) {
            if (w->conn_errors < 3)
                fprintf(stderr, "loadgen: connect to 127.0.0.1:%d: %s\n", opt.port, strerror(err));
            w->conn_errors++;
            conn_close(w, c);
            w->active--;
            c->step = S_PARKED;
            return;
        }
        ep_mod(w, c, false);
        start_cycle(w, c);
        return;
    }
    if (ev & EPOLLOUT)
        conn_flush(w, c);
    if (c->fd >= 0 && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        on_readable(w, c);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (w->epfd < 0) {
        perror("loadgen: epoll_create1");
        return NULL;
    }
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        c->id = w->first_id + i;
        c->rnd = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(c->id + 1) * 0xBF58476D1CE4E5B9ull) ^ now_ns();
        c->in_cap = 8192;
        c->in = malloc(c->in_cap);
        if (!c->in)
            abort();
        c->fd = -1;
        if ((opt.mode == M_WAITERS || opt.mode == M_WATCHERS) && c->id != 0) {
            /* waiters connect after the holder got the lock (see below) */
            c->step = S_PARKED;
            continue;
        }
        if (conn_open(w, c) == 0)
            w->active++;
        else
            c->step = S_PARKED;
    }
    bool waiters_started = (opt.mode != M_WAITERS && opt.mode != M_WATCHERS) || w->idx != 0;
    struct epoll_event evs[256];
    uint64_t grace_end = 0;
    while (w->active > 0 || !waiters_started) {
        uint64_t t = now_ns();
        if (t >= g_deadline_ns)
            atomic_store(&g_stop, true);
        if (atomic_load(&g_stop)) {
            if (opt.mode == M_WAITERS || opt.mode == M_WATCHERS || opt.mode == M_CONTENDED ||
                opt.mode == M_ETCD_CONTENDED)
                break; /* the waiters/blocked calls never finish on their own */
            if (grace_end == 0)
                grace_end = t + 3000000000ull;
            if (t >= grace_end)
                break;
        }
        if (opt.mode == M_WATCHERS && g_release && !g_released && waiters_started &&
            w->conns[0].step == S_PARKED && w->conns[0].fd >= 0) {
            /* SIGUSR1: the holder releases; every watcher should now answer */
            struct conn *h = &w->conns[0];
            char path[400], hdr[160];
            snprintf(path, sizeof path, "/locks/%s", h->name);
            snprintf(hdr, sizeof hdr, "Lock-Lease: %s\r\n", h->lease);
            req_build(h, "DELETE", path, hdr, NULL);
            h->step = S_RELEASE;
            g_released = true;
            send_request(w, h);
            g_rel_sent_ns = h->t_req_ns;
        }
        if (!waiters_started && w->conns[0].step == S_PARKED && w->conns[0].fd >= 0) {
            /* the holder has the lock: now open every waiter */
            for (int i = 1; i < w->nconns; i++) {
                struct conn *c = &w->conns[i];
                if (conn_open(w, c) == 0)
                    w->active++;
            }
            waiters_started = true;
        }
        int n = epoll_wait(w->epfd, evs, 256, 50);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("loadgen: epoll_wait");
            break;
        }
        for (int i = 0; i < n; i++)
            on_event(w, evs[i].data.ptr, evs[i].events);
    }
    for (int i = 0; i < w->nconns; i++) {
        conn_close(w, &w->conns[i]);
        free(w->conns[i].in);
        free(w->conns[i].body);
    }
    close(w->epfd);
    return NULL;
}

/* ---------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(
        stderr,
        "usage: loadgen --free_port\n"
        "       loadgen --mode MODE --port PORT [--clients N] [--threads T] [--secs S]\n"
        "               [--port2 PORT] [--max OPS] [--path P] [--method M] [--body JSON] [--name "
        "NAME]\n"
        "               [--ttl_ms MS] [--wait_ms MS] [--hold_us US] [--etcd_lease pair|client]\n"
        "               [--names N] [--shared_pct P] [--limit L]\n"
        "               [--label TEXT] [--ready_file F]\n"
        "modes: pairs single contended http etcd etcd-contended hold waiters watchers\n"
        "target is always 127.0.0.1\n");
    exit(2);
}

static void on_sigusr1(int sig)
{
    (void)sig;
    g_release = 1;
}

/* Prints a port that 127.0.0.1 can bind now (for run.sh's peers). */
static int print_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
        perror("loadgen: free port");
        return 1;
    }
    printf("%d\n", ntohs(sa.sin_port));
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--free_port"))
        return print_free_port();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--mode")) {
            bool ok = false;
            for (unsigned m = 0; m < sizeof mode_names / sizeof mode_names[0]; m++)
                if (!strcmp(v, mode_names[m])) {
                    opt.mode = (enum mode)m;
                    ok = true;
                }
            if (!strcmp(v, "get")) {
                opt.mode = M_HTTP;
                ok = true;
            }
            if (!ok)
                usage();
        } else if (!strcmp(a, "--port"))
            opt.port = atoi(v);
        else if (!strcmp(a, "--port2"))
            opt.port2 = atoi(v);
        else if (!strcmp(a, "--clients"))
            opt.clients = atoi(v);
        else if (!strcmp(a, "--threads"))
            opt.threads = atoi(v);
        else if (!strcmp(a, "--secs"))
            opt.secs = atof(v);
        else if (!strcmp(a, "--max"))
            opt.max_ops = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--path"))
            opt.path = v;
        else if (!strcmp(a, "--method"))
            opt.method = v;
        else if (!strcmp(a, "--body"))
            opt.body = v;
        else if (!strcmp(a, "--name"))
            opt.name = v;
        else if (!strcmp(a, "--label"))
            opt.label = v;
        else if (!strcmp(a, "--ready_file"))
            opt.ready_file = v;
        else if (!strcmp(a, "--ttl_ms"))
            opt.ttl_ms = atoll(v);
        else if (!strcmp(a, "--wait_ms"))
            opt.wait_ms = atoll(v);
        else if (!strcmp(a, "--hold_us"))
            opt.hold_us = atoll(v);
        else if (!strcmp(a, "--names"))
            opt.names = atoi(v);
        else if (!strcmp(a, "--shared_pct"))
            opt.shared_pct = atoi(v);
        else if (!strcmp(a, "--limit"))
            opt.limit = atoll(v);
        else if (!strcmp(a, "--etcd_lease"))
            opt.etcd_lease_per_client = !strcmp(v, "client");
        else
            usage();
    }
    if (opt.port <= 0 || opt.port > 65535 || opt.clients < 1 || opt.threads < 1 || opt.secs <= 0)
        usage();
    if (opt.mode == M_SINGLE)
        opt.clients = 1;
    if (opt.mode == M_CONTENDED || opt.mode == M_ETCD_CONTENDED || opt.mode == M_WAITERS ||
        opt.mode == M_WATCHERS)
        opt.threads = 1; /* handoff bookkeeping and the holder live on one thread */
    if (opt.threads > opt.clients)
        opt.threads = opt.clients;
    if ((opt.mode == M_WAITERS || opt.mode == M_WATCHERS) && opt.clients < 2)
        usage();

    /* enough descriptors for 10,000 waiters */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)opt.clients + 64) {
        rl.rlim_cur =
            rl.rlim_max < (rlim_t)opt.clients + 64 ? rl.rlim_max : (rlim_t)opt.clients + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    if (opt.mode == M_WATCHERS)
        signal(SIGUSR1, on_sigusr1);

    struct worker *ws = calloc((size_t)opt.threads, sizeof *ws);
    struct conn *cs = calloc((size_t)opt.clients, sizeof *cs);
    if (!ws || !cs)
        abort();
    g_t0_ns = now_ns();
    g_deadline_ns = g_t0_ns + (uint64_t)(opt.secs * 1e9);
    int per = opt.clients / opt.threads, extra = opt.clients % opt.threads, at = 0;
    for (int t = 0; t < opt.threads; t++) {
        ws[t].idx = t;
        ws[t].nconns = per + (t < extra ? 1 : 0);
        ws[t].conns = cs + at;
        ws[t].first_id = at;
        at += ws[t].nconns;
    }

    for (int t = 0; t < opt.threads; t++)
        if (pthread_create(&ws[t].tid, NULL, worker_main, &ws[t]) != 0) {
            perror("loadgen: pthread_create");
            return 1;
        }
    if (opt.ready_file) {
        /* waiters/hold: tell run.sh when every request is out */
        bool written = false;
        while (!written && !atomic_load(&g_stop) && now_ns() < g_deadline_ns) {
            bool ready = opt.mode == M_WAITERS || opt.mode == M_WATCHERS
                             ? atomic_load(&g_connected) >= opt.clients - 1
                             : (opt.max_ops && atomic_load(&g_ops) >= opt.max_ops);
            if (ready) {
                FILE *f = fopen(opt.ready_file, "w");
                if (f) {
                    fprintf(f, "%d\n", atomic_load(&g_connected));
                    fclose(f);
                }
                written = true;
            } else {
                struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000000};
                nanosleep(&ts, NULL);
            }
        }
    }
    for (int t = 0; t < opt.threads; t++)
        pthread_join(ws[t].tid, NULL);
    double elapsed = (double)(now_ns() - g_t0_ns) / 1e9;

    struct worker tot;
    memset(&tot, 0, sizeof tot);
    for (int t = 0; t < opt.threads; t++) {
        tot.ops += ws[t].ops;
        tot.reqs += ws[t].reqs;
        tot.errors += ws[t].errors;
        tot.timeouts += ws[t].timeouts;
        tot.conn_errors += ws[t].conn_errors;
        hist_merge(&tot.req, &ws[t].req);
        hist_merge(&tot.acq, &ws[t].acq);
        hist_merge(&tot.rel, &ws[t].rel);
        hist_merge(&tot.pair, &ws[t].pair);
        hist_merge(&tot.handoff, &ws[t].handoff);
        hist_merge(&tot.handoff_send, &ws[t].handoff_send);
        hist_merge(&tot.handoff_cross, &ws[t].handoff_cross);
        hist_merge(&tot.watch, &ws[t].watch);
    }
    printf("RESULT label=%s mode=%s port=%d clients=%d threads=%d secs=%.2f ops=%" PRIu64
           " ops_per_s=%.0f reqs=%" PRIu64 " reqs_per_s=%.0f errors=%" PRIu64 " timeouts=%" PRIu64
           " conn_errors=%" PRIu64 " grants=%" PRIu64 " regrants=%" PRIu64,
           opt.label[0] ? opt.label : mode_names[opt.mode], mode_names[opt.mode], opt.port,
           opt.clients, opt.threads, elapsed, tot.ops, (double)tot.ops / elapsed, tot.reqs,
           (double)tot.reqs / elapsed, tot.errors, tot.timeouts, tot.conn_errors, tot.acq.count,
           g_regrants);
    hist_print(stdout, "req", &tot.req);
    hist_print(stdout, "acq", &tot.acq);
    hist_print(stdout, "rel", &tot.rel);
    hist_print(stdout, "pair", &tot.pair);
    hist_print(stdout, "handoff", &tot.handoff);
    hist_print(stdout, "handoff_send", &tot.handoff_send);
    hist_print(stdout, "handoff_cross", &tot.handoff_cross);
    hist_print(stdout, "watch", &tot.watch);
    printf("\n");
    fflush(stdout);
    free(ws);
    free(cs);
    return 0;
}
