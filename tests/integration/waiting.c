/*
 * waiting.c - blocking acquire (issue 5) beyond api_locks' single-lockd
 * basics: pub/sub wake-ups between two lockd on one Redis, no polling storm,
 * the holder's expiry as the fallback for a lost message, 2,000 and 10,000
 * concurrent waiters (raw sockets on one epoll, not a thread each), session
 * expiry and wait_ms answers, drain, exit within 500 ms of SIGTERM (idle or
 * with a waiter, memory and Redis), metrics, backend attempts per handoff.
 * Starts its own redis-server and lockd processes; single-threaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "tests/lib/harness.h"

static struct th_redis rd;
static char redis_url[64];
static struct th_lockd la, lb; /* two lockd on the same Redis */
static struct th_client *cl;

/* ---------------------------------------------------------------- helpers */

/* Acquires name on l (must succeed); copies the lease out, returns the token. */
static long long grab(const struct th_lockd *l, const char *name, const char *body, char *lease)
{
    struct th_resp r;
    th_http(cl, "POST", th_url(l, "/locks/", name), body, NULL, &r);
    if (r.status != 200)
        th_fail(__FILE__, __LINE__, "acquire %s: %ld %s", name, r.status, r.body);
    snprintf(lease, 40, "%s", th_jstr(&r, "lease"));
    long long t = th_jint(&r, "fencing_token");
    th_resp_free(&r);
    return t;
}

static long release_status(const struct th_lockd *l, const char *name, const char *lease)
{
    return th_req(cl, "DELETE", th_url(l, "/locks/", name), NULL, lease, NULL);
}

static void release(const struct th_lockd *l, const char *name, const char *lease)
{
    long s = release_status(l, name, lease);
    if (s != 200)
        th_fail(__FILE__, __LINE__, "release %s: %ld", name, s);
}

static long long queued(const struct th_lockd *l, const char *name)
{
    struct th_resp r;
    th_http(cl, "GET", th_url(l, "/locks/", name), NULL, NULL, &r);
    long long n = r.status == 200 ? th_jint(&r, "waiters") : -1;
    th_resp_free(&r);
    return n;
}

struct qwant {
    const struct th_lockd *l;
    const char *name;
    long long n;
};

static bool queued_is(void *arg)
{
    struct qwant *q = arg;
    return queued(q->l, q->name) == q->n;
}

static void wait_queued(const struct th_lockd *l, const char *name, long long n, int64_t ms)
{
    struct qwant q = {l, name, n};
    if (!th_wait_for(queued_is, &q, ms))
        th_fail(__FILE__, __LINE__, "'%s': %lld waiters queued, want %lld", name, queued(l, name),
                n);
}

/* A sample from /metrics: the first line starting with "metric " (or
 * "metric{"), -1 when missing. */
static double metric(const struct th_lockd *l, const char *name)
{
    struct th_resp r;
    th_http(cl, "GET", th_url(l, "/metrics", ""), NULL, NULL, &r);
    double v = -1;
    size_t nl = strlen(name);
    for (const char *p = r.body; p != NULL && *p;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, nl) == 0 && (p[nl] == ' ' || p[nl] == '{')) {
            const char *sp = strchr(p + nl, ' ');
            if (sp != NULL)
                v = strtod(sp + 1, NULL);
            break;
        }
    }
    th_resp_free(&r);
    return v;
}

/* Redis commands served so far (INFO commandstats), without INFO itself:
 * what lockd processes asked of Redis. */
static long long redis_commands(void)
{
    const char *out = th_redis_cli(&rd, "INFO commandstats");
    long long sum = 0;
    for (const char *p = strstr(out, "cmdstat_"); p != NULL; p = strstr(p + 1, "cmdstat_")) {
        if (strncmp(p, "cmdstat_info:", 13) == 0)
            continue;
        const char *c = strstr(p, "calls=");
        if (c != NULL)
            sum += atoll(c + 6);
    }
    return sum;
}

static long long script_calls(void)
{
    return th_redis_calls(&rd, "fcall") + th_redis_calls(&rd, "function|load");
}

static int lockd_threads(const struct th_lockd *l)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)l->pid);
    FILE *f = fopen(path, "r");
    int n = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "Threads:", 8) == 0)
            n = atoi(line + 8);
    fclose(f);
    return n;
}

static void start_lockd(struct th_lockd *l, bool redis, const char *const *extra)
{
    const char *args[32];
    int n = 0;
    if (redis) {
        args[n++] = "--redis";
        args[n++] = redis_url;
    }
    for (const char *const *a = extra; a && *a && n < 30; a++)
        args[n++] = *a;
    args[n] = NULL;
    th_lockd_start(l, args, NULL);
}

/* ---------------------------------------------------------------- raw waiters
 * One nonblocking socket per waiter, all on one epoll: a waiter is an HTTP/1.1
 * request written at once and a response read whenever it comes. */

struct rw {
    int fd;
    bool done;
    bool broken; /* connection failed or closed without an answer */
    int status;
    json_t *json; /* parsed body of the answer */
    int64_t t_sent, t_done;
    char *in;
    size_t inlen, incap;
};

struct pool {
    int ep;
    struct rw *w;
    int n, cap;
    int ndone;
};

static void pool_init(struct pool *p, int cap)
{
    memset(p, 0, sizeof(*p));
    p->ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(p->ep >= 0);
    p->cap = cap;
    p->w = calloc((size_t)cap, sizeof(*p->w));
    CHECK(p->w != NULL);
}

static void rw_close(struct rw *w)
{
    if (w->fd >= 0) {
        close(w->fd); /* also leaves the epoll set */
        w->fd = -1;
    }
}

static void pool_free(struct pool *p)
{
    for (int i = 0; i < p->n; i++) {
        rw_close(&p->w[i]);
        json_decref(p->w[i].json);
        free(p->w[i].in);
    }
    free(p->w);
    close(p->ep);
    memset(p, 0, sizeof(*p));
}

/* Opens a connection to l and sends POST /locks/name with body; returns
 * the waiter's index. */
static int pool_add(struct pool *p, const struct th_lockd *l, const char *name, const char *body)
{
    CHECK(p->n < p->cap);
    struct rw *w = &p->w[p->n];
    memset(w, 0, sizeof(*w));
    w->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (w->fd < 0)
        th_fail(__FILE__, __LINE__, "socket (waiter %d): %s", p->n, strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)l->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(w->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        th_fail(__FILE__, __LINE__, "connect (waiter %d): %s", p->n, strerror(errno));
    char req[1024];
    int len = snprintf(req, sizeof(req),
                       "POST /locks/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                       "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                       name, strlen(body), body);
    CHECK(len > 0 && (size_t)len < sizeof(req));
    w->t_sent = th_now_ms();
    if (send(w->fd, req, (size_t)len, MSG_NOSIGNAL) != len)
        th_fail(__FILE__, __LINE__, "send (waiter %d): %s", p->n, strerror(errno));
    fcntl(w->fd, F_SETFL, fcntl(w->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)p->n};
    CHECK(epoll_ctl(p->ep, EPOLL_CTL_ADD, w->fd, &ev) == 0);
    return p->n++;
}

/* Parses a complete response in w->in; true when one is there. */
static bool rw_parse(struct rw *w)
{
    char *hend = w->in ? strstr(w->in, "\r\n\r\n") : NULL;
    if (hend == NULL)
        return false;
    long clen = 0;
    for (char *h = w->in; h < hend; h = strstr(h, "\r\n") + 2) {
        if (strncasecmp(h, "Content-Length:", 15) == 0)
            clen = strtol(h + 15, NULL, 10);
    }
    size_t need = (size_t)(hend + 4 - w->in) + (size_t)clen;
    if (w->inlen < need)
        return false;
    w->status = atoi(w->in + 9);
    w->json = json_loadb(hend + 4, (size_t)clen, 0, NULL);
    return true;
}

/* Reads what is ready on w; marks it done when a whole answer arrived. */
static void rw_read(struct pool *p, struct rw *w)
{
    for (;;) {
        if (w->incap - w->inlen < 4096) {
            w->incap = w->incap ? w->incap * 2 : 8192;
            w->in = realloc(w->in, w->incap);
            CHECK(w->in != NULL);
        }
        ssize_t k = recv(w->fd, w->in + w->inlen, w->incap - w->inlen - 1, 0);
        if (k > 0) {
            w->inlen += (size_t)k;
            w->in[w->inlen] = '\0';
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        /* EOF or error */
        if (!rw_parse(w))
            w->broken = true;
        w->done = true;
        w->t_done = th_now_ms();
        p->ndone++;
        rw_close(w);
        return;
    }
    if (rw_parse(w)) {
        w->done = true;
        w->t_done = th_now_ms();
        p->ndone++;
        rw_close(w);
    }
}

/* Waits up to timeout_ms for answers; returns how many arrived. Indexes of
 * the waiters answered go to out (up to max) when out is not NULL. */
static int pool_poll(struct pool *p, int64_t timeout_ms, int *out, int max)
{
    struct epoll_event evs[256];
    int got = 0;
    int64_t end = th_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = end - th_now_ms();
        int k = epoll_wait(p->ep, evs, 256, left > 0 ? (int)left : 0);
        if (k < 0 && errno == EINTR)
            continue;
        CHECK(k >= 0);
        for (int i = 0; i < k; i++) {
            struct rw *w = &p->w[evs[i].data.u32];
            if (w->done)
                continue;
            rw_read(p, w);
            if (w->done) {
                if (out != NULL && got < max)
                    out[got] = (int)evs[i].data.u32;
                got++;
            }
        }
        if (got > 0 || th_now_ms() >= end)
            return got;
    }
}

/* Polls until every waiter of p has its answer or timeout_ms passes. */
static void pool_drain(struct pool *p, int64_t timeout_ms)
{
    int64_t end = th_now_ms() + timeout_ms;
    while (p->ndone < p->n && th_now_ms() < end)
        pool_poll(p, end - th_now_ms(), NULL, 0);
}

/* p becomes a pool of one waiter on l for name (body asks to wait), queued
 * there before this returns. */
static void park_one(struct pool *p, const struct th_lockd *l, const char *name, const char *body)
{
    pool_init(p, 1);
    pool_add(p, l, name, body);
    wait_queued(l, name, 1, 3000);
}

static const char *rw_str(const struct rw *w, const char *key)
{
    json_t *v = w->json ? json_object_get(w->json, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static long long rw_int(const struct rw *w, const char *key)
{
    json_t *v = w->json ? json_object_get(w->json, key) : NULL;
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static const char *rw_err(const struct rw *w)
{
    return rw_str(w, "error");
}

/* Waits for exactly one answer on p, which must be a 200; returns its index. */
static int one_grant(struct pool *p, int64_t timeout_ms)
{
    int idx[4];
    int k = pool_poll(p, timeout_ms, idx, 4);
    if (k == 0)
        th_fail(__FILE__, __LINE__, "no waiter answered within %lld ms", (long long)timeout_ms);
    if (k != 1)
        th_fail(__FILE__, __LINE__, "%d waiters answered at once (status %d, %d)", k,
                p->w[idx[0]].status, p->w[idx[1]].status);
    struct rw *w = &p->w[idx[0]];
    if (w->status != 200)
        th_fail(__FILE__, __LINE__, "waiter %d answered %d %s", idx[0], w->status,
                w->in ? w->in : "(nothing)");
    return idx[0];
}

/* ---------------------------------------------------------------- tests */

/* Holder on A, waiter on B: B learns of the release through pub/sub.
 * Several rounds, some releasing the instant the waiter is queued. */
static void test_cross_lockd_handoff(void)
{
    int64_t worst = 0;
    for (int round = 0; round < 8; round++) {
        char lease[40];
        grab(&la, "xl", "{\"ttl_ms\":20000}", lease);
        struct pool p;
        park_one(&p, &lb, "xl", "{\"wait_ms\":10000,\"ttl_ms\":20000}");
        if (round % 2 == 0)
            th_sleep_ms(30); /* settled subscription, and a fresh one */
        int64_t t0 = th_now_ms();
        release(&la, "xl", lease);
        int i = one_grant(&p, 5000);
        int64_t dt = p.w[i].t_done - t0;
        if (dt > worst)
            worst = dt;
        if (dt >= 100)
            th_fail(__FILE__, __LINE__, "round %d: granted on B %lld ms after the release on A",
                    round, (long long)dt);
        release(&lb, "xl", rw_str(&p.w[i], "lease"));
        pool_free(&p);
    }
    printf("# cross-lockd release->grant: worst of 8 rounds %lld ms\n", (long long)worst);
}

/* Two waiters on B, holder on A. The first waiter's grant makes the second
 * B's head without a Redis attempt (B knows the holder is its own), so when
 * that grant is released through A, the release must still be published
 * (acquire.lua marks a grant to a waiter): B's second waiter is granted at
 * once, not at the first one's expiry. */
static void test_handoff_behind_own_waiter(void)
{
    char lease[40];
    grab(&la, "own", "{\"ttl_ms\":20000}", lease);
    struct pool p;
    pool_init(&p, 2);
    pool_add(&p, &lb, "own", "{\"wait_ms\":10000,\"ttl_ms\":20000}");
    wait_queued(&lb, "own", 1, 3000);
    pool_add(&p, &lb, "own", "{\"wait_ms\":10000,\"ttl_ms\":20000}");
    wait_queued(&lb, "own", 2, 3000);
    th_sleep_ms(30);
    release(&la, "own", lease);
    int i = one_grant(&p, 5000);
    CHECK_EQ_INT(queued(&lb, "own"), 1);
    th_sleep_ms(30); /* the second is B's head now, waiting */
    int64_t t0 = th_now_ms();
    release(&la, "own", rw_str(&p.w[i], "lease"));
    int j = one_grant(&p, 5000);
    int64_t dt = p.w[j].t_done - t0;
    printf("# B's second waiter granted %lld ms after the release on A\n", (long long)dt);
    CHECK(j != i);
    CHECK(dt < 1000);
    release(&lb, "own", rw_str(&p.w[j], "lease"));
    pool_free(&p);
}

/* A name whose queue on B empties and fills again many times a second
 * (wait_ms 1 on a held lock: subscribe, time out, unsubscribe, ...) must
 * keep B alive and still subscribed: a release on A then wakes B's waiter
 * at once, not at the holder's expiry. With and without another name
 * keeping B's subscriber connection subscribed meanwhile. */
static void churn(bool anchored)
{
    enum { CAP = 20000, PAR = 4 };
    char lease[40], alease[40];
    grab(&la, "churn", "{\"ttl_ms\":30000}", lease);
    struct pool anchor;
    pool_init(&anchor, 1);
    if (anchored) {
        grab(&la, "anchor", "{\"ttl_ms\":30000}", alease);
        pool_add(&anchor, &lb, "anchor", "{\"wait_ms\":20000}");
        wait_queued(&lb, "anchor", 1, 3000);
    }
    struct pool p;
    pool_init(&p, CAP);
    int64_t end = th_now_ms() + 1500;
    for (int i = 0; i < PAR; i++)
        pool_add(&p, &lb, "churn", "{\"wait_ms\":1}");
    while (th_now_ms() < end && p.n < CAP - PAR) {
        int k = pool_poll(&p, 100, NULL, 0);
        for (int i = 0; i < k && p.n < CAP; i++)
            pool_add(&p, &lb, "churn", "{\"wait_ms\":1}");
    }
    pool_drain(&p, 3000);
    CHECK_EQ_INT(p.ndone, p.n);
    for (int i = 0; i < p.n; i++)
        CHECK_EQ_INT(p.w[i].status, 409);
    printf("# churn%s: %d short waits on B\n", anchored ? " (anchored)" : "", p.n);
    pool_free(&p);
    CHECK(kill(lb.pid, 0) == 0);
    park_one(&p, &lb, "churn", "{\"wait_ms\":10000}");
    th_sleep_ms(30);
    int64_t t0 = th_now_ms();
    release(&la, "churn", lease);
    int i = one_grant(&p, 5000);
    printf("# churn%s: then granted on B %lld ms after the release on A\n",
           anchored ? " (anchored)" : "", (long long)(p.w[i].t_done - t0));
    CHECK(p.w[i].t_done - t0 < 500);
    release(&lb, "churn", rw_str(&p.w[i], "lease"));
    pool_free(&p);
    if (anchored) {
        release(&la, "anchor", alease);
        i = one_grant(&anchor, 3000);
        release(&lb, "anchor", rw_str(&anchor.w[i], "lease"));
    }
    pool_free(&anchor);
}

static void test_subscription_churn(void)
{
    churn(false);
    churn(true);
}

/* B's queue for a name empties (a wait_ms 1 waiter times out: unsubscribe)
 * and a new waiter comes right after (subscribe again); the release on A
 * follows within 0-0.6 ms, often before B's SUBSCRIBE is in force. B must
 * not miss it: the holder's ttl is 3 s, so a missed message shows as a late
 * grant. Gaps and delays are swept over the rounds. */
static void test_resubscribe_race(void)
{
    enum { ROUNDS = 90 };
    int64_t worst = 0;
    char lease[40];
    for (int round = 0; round < ROUNDS; round++) {
        grab(&la, "resub", "{\"ttl_ms\":3000}", lease);
        struct pool p;
        pool_init(&p, 2);
        int s = pool_add(&p, &lb, "resub", "{\"wait_ms\":1}");
        pool_poll(&p, 2000, NULL, 0);
        CHECK(p.w[s].done && p.w[s].status == 409);
        struct timespec gap = {0, (long)(round % 3) * 300000L};
        nanosleep(&gap, NULL);
        int w = pool_add(&p, &lb, "resub", "{\"wait_ms\":5000}");
        struct timespec delay = {0, (long)(round / 3 % 15) * 40000L};
        nanosleep(&delay, NULL);
        int64_t t0 = th_now_ms();
        release(&la, "resub", lease);
        int i = one_grant(&p, 5000);
        CHECK_EQ_INT(i, w);
        int64_t dt = p.w[i].t_done - t0;
        if (dt > worst)
            worst = dt;
        if (dt >= 1000)
            th_fail(__FILE__, __LINE__, "round %d: granted %lld ms after the release", round,
                    (long long)dt);
        release(&lb, "resub", rw_str(&p.w[i], "lease"));
        pool_free(&p);
    }
    printf("# resubscribe race: worst release->grant of %d rounds %lld ms\n", ROUNDS,
           (long long)worst);
}

/* 20 waiters (10 on each lockd) on a held lock for 2 s: Redis sees a small
 * constant number of commands, not waiters x time. */
static void test_no_polling_storm(void)
{
    char lease[40];
    grab(&la, "storm", "{\"ttl_ms\":30000}", lease);
    struct pool p;
    pool_init(&p, 20);
    for (int i = 0; i < 20; i++)
        pool_add(&p, i % 2 ? &lb : &la, "storm", "{\"wait_ms\":20000,\"ttl_ms\":5000}");
    wait_queued(&la, "storm", 10, 3000);
    wait_queued(&lb, "storm", 10, 3000);
    th_sleep_ms(100); /* let the subscriptions and first attempts settle */
    long long c0 = redis_commands(), s0 = script_calls();
    th_sleep_ms(2000);
    long long c1 = redis_commands(), s1 = script_calls();
    printf("# 20 waiters x 2 s: %lld Redis commands (%lld scripts)\n", c1 - c0, s1 - s0);
    CHECK(c1 - c0 <= 10);
    CHECK_EQ_INT(p.ndone, 0);
    /* Handing the lock down the 20 still works, across both lockd. */
    int64_t deadline = th_now_ms() + 10000;
    release(&la, "storm", lease);
    long long last = 0;
    for (int k = 0; k < 20; k++) {
        int i = one_grant(&p, deadline - th_now_ms());
        long long t = rw_int(&p.w[i], "fencing_token");
        CHECK(t > last);
        last = t;
        long s = release_status(&la, "storm", rw_str(&p.w[i], "lease"));
        CHECK_EQ_INT(s, 200);
    }
    CHECK_EQ_INT(queued(&la, "storm"), 0);
    CHECK_EQ_INT(queued(&lb, "storm"), 0);
    pool_free(&p);
}

/* No release message at all: the waiter on B is granted at the holder's
 * expiry, learned from its failed attempt's PTTL. */
static void test_lost_message(void)
{
    /* (a) the holder's ttl runs out: nobody publishes anything */
    char lease[40];
    int64_t t0 = th_now_ms();
    grab(&la, "lost", "{\"ttl_ms\":800}", lease);
    struct pool p;
    pool_init(&p, 2);
    pool_add(&p, &lb, "lost", "{\"wait_ms\":5000}");
    int i = one_grant(&p, 3000);
    int64_t dt = p.w[i].t_done - t0;
    printf("# expiry wake-up: granted %lld ms after a ttl_ms 800 grant\n", (long long)dt);
    CHECK(dt >= 700 && dt <= 800 + 400 * th_time_scale()); /* not wait_ms's 5000 */
    release(&lb, "lost", rw_str(&p.w[i], "lease"));
    pool_free(&p);

    /* (b) the key disappears without a message (as if PUBLISH were lost) */
    t0 = th_now_ms();
    grab(&la, "lost2", "{\"ttl_ms\":1500}", lease);
    park_one(&p, &lb, "lost2", "{\"wait_ms\":8000}");
    const char *out = th_redis_cli(&rd, "DEL 'lockd:{lost2}'");
    CHECK(strstr(out, "1") != NULL);
    i = one_grant(&p, 4000);
    dt = p.w[i].t_done - t0;
    printf("# lost message: granted %lld ms after a ttl_ms 1500 grant\n", (long long)dt);
    CHECK(dt <= 1500 + 400 * th_time_scale()); /* not wait_ms's 8000 */
    release(&lb, "lost2", rw_str(&p.w[i], "lease"));
    pool_free(&p);

    /* (c) B's subscriber connection dies; the release is published while it
     * is away. After reconnecting, B wakes its waiters itself. */
    grab(&la, "lost3", "{\"ttl_ms\":20000}", lease);
    park_one(&p, &lb, "lost3", "{\"wait_ms\":15000}");
    th_sleep_ms(50);
    th_redis_cli(&rd, "CLIENT KILL TYPE pubsub");
    t0 = th_now_ms();
    release(&la, "lost3", lease);
    i = one_grant(&p, 5000);
    dt = p.w[i].t_done - t0;
    printf("# subscriber reconnect: granted %lld ms after the release\n", (long long)dt);
    CHECK(dt <= 2500 * th_time_scale()); /* not the ttl's 20000 */
    release(&lb, "lost3", rw_str(&p.w[i], "lease"));
    pool_free(&p);
}

/* A release heard while the head waits (here: a release on A, through
 * pub/sub) is not lost when, before the head's loop acts on it, a release
 * on B that releases nothing (a stale lease of the name, released over and
 * over by 4 clients for the whole test) carries the head (waiters_ride)
 * and gives it back (ride_back): the head asks then, as the poke it missed
 * would have had it ask. Each of 1000 rounds a waiter on B, refused by
 * 20 s holders on A (limit of them: an exclusive lock, or a full
 * semaphore), must be granted within 1 s of a holder's release. Before,
 * the head went back to waiting for its retry at a holder's expiry with a
 * slot free: 56 of 1000 rounds of the exclusive lock, 48 of the semaphore
 * of 2 (the window is a poke's trip to the head's loop; ~2.5 s a test
 * here). 1000 / TH_TIME_SCALE rounds (at least 50) under TSan and
 * valgrind. */
#define RIDE_STORM_CLIENTS 4
#define RIDE_STORM_ROUNDS 1000

static atomic_bool storm_stop;

struct storm {
    const struct th_lockd *l;
    char name[32];
    char lease[40];
};

static void *storm_run(void *arg)
{
    struct storm *s = arg;
    struct th_client *c = th_client_new();
    while (!atomic_load(&storm_stop))
        (void)th_req(c, "DELETE", th_url(s->l, "/locks/", s->name), NULL, s->lease, NULL);
    th_client_free(c);
    return NULL;
}

static void ride_keeps_wakeup(const char *name, int limit)
{
    char body[96];
    snprintf(body, sizeof(body), "{\"ttl_ms\":20000,\"limit\":%d}", limit);
    char wbody[96];
    snprintf(wbody, sizeof(wbody), "{\"ttl_ms\":20000,\"limit\":%d,\"wait_ms\":10000}", limit);
    struct storm s = {.l = &lb};
    snprintf(s.name, sizeof(s.name), "%s", name);
    grab(&la, s.name, body, s.lease);
    release(&la, s.name, s.lease); /* s.lease: stale from now on */
    atomic_store(&storm_stop, false);
    pthread_t th[RIDE_STORM_CLIENTS];
    for (int i = 0; i < RIDE_STORM_CLIENTS; i++)
        pthread_create(&th[i], NULL, storm_run, &s);
    /* fewer rounds where lockd runs slowed (TSan, valgrind): the window
     * is the same, the rounds cost the scale each */
    int rounds = RIDE_STORM_ROUNDS / th_time_scale();
    if (rounds < 50)
        rounds = 50;
    int late = 0;
    int64_t worst = 0;
    for (int round = 0; round < rounds; round++) {
        char lease[2][40];
        for (int i = 0; i < limit; i++)
            grab(&la, s.name, body, lease[i]);
        struct pool p;
        park_one(&p, &lb, s.name, wbody);
        int64_t t0 = th_now_ms();
        release(&la, s.name, lease[0]);
        int idx[1];
        if (pool_poll(&p, 1000 * th_time_scale(), idx, 1) == 0) {
            late++;
        } else {
            CHECK_EQ_INT(p.w[idx[0]].status, 200);
            if (p.w[idx[0]].t_done - t0 > worst)
                worst = p.w[idx[0]].t_done - t0;
            release(&lb, s.name, rw_str(&p.w[idx[0]], "lease"));
        }
        pool_free(&p); /* a waiter still queued leaves with its connection */
        for (int i = 1; i < limit; i++)
            release(&la, s.name, lease[i]);
    }
    atomic_store(&storm_stop, true);
    for (int i = 0; i < RIDE_STORM_CLIENTS; i++)
        pthread_join(th[i], NULL);
    printf("# limit %d, stale releases carrying the head: %d of %d rounds not granted within "
           "1 s of the release; worst of the others %lld ms\n",
           limit, late, rounds, (long long)worst);
    CHECK_EQ_INT(late, 0);
}

static void test_ride_keeps_wakeup(void)
{
    ride_keeps_wakeup("ride-x", 1);
}

static void test_ride_keeps_wakeup_semaphore(void)
{
    ride_keeps_wakeup("ride-s", 2);
}

/* A Redis of its own and a lockd on it that gives up on Redis after 500 ms
 * (scaled): the doubt tests below freeze that Redis past it. */
static void doubt_start(struct th_redis *r2, struct th_lockd *l)
{
    th_redis_start(r2, 0, NULL);
    char url[64], tmo[24];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", r2->port);
    snprintf(tmo, sizeof(tmo), "%lld", 500 * th_time_scale());
    const char *args[] = {"--redis", url, "--backend_timeout_ms", tmo, NULL};
    th_lockd_start(l, args, NULL);
}

/* A release answered 503 while its script still runs (engine.c
 * release_done: the backend in doubt) wakes this lockd's own waiter, which
 * its own pub/sub message (skipped as its own) would not: a lockd with
 * backend_timeout_ms 500 on a Redis of its own, holders with a 20 s ttl, a
 * waiter W refused and queued behind them; Redis frozen (SIGSTOP), a
 * holder's release sent and answered 503 at the deadline (the connection
 * dropped, the script still in Redis' socket), Redis resumed: the script
 * runs, and W must be granted within 1 s, not at the holders' expiry (20
 * s). Three ways the release reaches W: an exclusive W rides on it
 * (release_handoff.lua grants W in the script: W renews its lease to learn
 * it, ride_back), a reader W does not ride (the head is kicked and asks), a
 * semaphore's W rides with the other slot still held. Each time W's lease
 * is the one that holds (its release 200) and nobody else's does. */
static void release_in_doubt(const char *name, const char *hbody, int nholders, const char *wbody)
{
    long long scale = th_time_scale();
    struct th_redis r2;
    struct th_lockd l;
    doubt_start(&r2, &l);
    char lease[2][40];
    long long top = 0;
    for (int i = 0; i < nholders; i++) {
        long long t = grab(&l, name, hbody, lease[i]);
        if (t > top)
            top = t;
    }
    struct pool p;
    park_one(&p, &l, name, wbody);
    th_sleep_ms(200 * scale); /* refused: W waits for the holder's expiry */
    CHECK_EQ_INT(p.ndone, 0);
    kill(r2.pid, SIGSTOP);
    long st = release_status(&l, name, lease[0]);
    int64_t t0 = th_now_ms();
    kill(r2.pid, SIGCONT);
    int idx[1];
    int got = pool_poll(&p, 1000 * scale, idx, 1);
    int64_t dt = th_now_ms() - t0;
    printf("# %s: the release answered %ld; W %s %lld ms after Redis resumed\n", name, st,
           got ? "answered" : "not answered", (long long)dt);
    CHECK_EQ_INT(st, 503);
    CHECK_EQ_INT(got, 1);
    CHECK_EQ_INT(p.w[idx[0]].status, 200);
    /* its token is its grant's, above the holders' (a reclaim answers the
     * token its renewal found) */
    CHECK(rw_int(&p.w[idx[0]], "fencing_token") > top);
    /* the release ran: A's lease holds nothing (404, or 409: W holds it) */
    long again = release_status(&l, name, lease[0]);
    CHECK(again == 404 || again == 409);
    release(&l, name, rw_str(&p.w[idx[0]], "lease"));
    for (int i = 1; i < nholders; i++)
        release(&l, name, lease[i]);
    CHECK_EQ_INT(queued(&l, name), 0);
    pool_free(&p);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&r2);
}

static void test_release_in_doubt_exclusive(void)
{
    release_in_doubt("doubt-x", "{\"ttl_ms\":20000}", 1, "{\"ttl_ms\":20000,\"wait_ms\":15000}");
}

static void test_release_in_doubt_reader(void)
{
    release_in_doubt("doubt-r", "{\"ttl_ms\":20000}", 1,
                     "{\"ttl_ms\":20000,\"mode\":\"shared\",\"wait_ms\":15000}");
}

static void test_release_in_doubt_semaphore(void)
{
    release_in_doubt("doubt-s", "{\"ttl_ms\":20000,\"limit\":2}", 2,
                     "{\"ttl_ms\":20000,\"limit\":2,\"wait_ms\":15000}");
}

/* The other outcome of a release answered 503: its script never ran.
 * Redis paused by CLIENT PAUSE ALL (it reads, runs nothing) past the
 * release's deadline: lockd drops the connection and Redis frees the
 * client with its release unrun. The exclusive W that rode on it renews
 * its lease (not held), asks (refused: A holds) and waits for its timer
 * again: at most those two calls, no grant, A's lease still holds (its
 * release again 200), and that release hands the name to W at once.
 * Under valgrind Redis has run the release at the pause's end all the
 * same: then W must hold the name and A's lease nothing (never both). */
static void test_release_in_doubt_lost(void)
{
    long long scale = th_time_scale();
    const char *name = "doubt-lost";
    struct th_redis r2;
    struct th_lockd l;
    doubt_start(&r2, &l);
    char pause[48];
    snprintf(pause, sizeof(pause), "CLIENT PAUSE %lld ALL", 800 * scale);
    char lease[40];
    grab(&l, name, "{\"ttl_ms\":20000}", lease);
    struct pool p;
    park_one(&p, &l, name, "{\"ttl_ms\":20000,\"wait_ms\":15000}");
    th_sleep_ms(200 * scale); /* refused: W waits for the holder's expiry */
    long long calls0 = th_redis_calls(&r2, "fcall");
    th_redis_cli(&r2, pause);
    long st = release_status(&l, name, lease);
    int idx[1];
    int got = pool_poll(&p, 1300 * scale, idx, 1); /* the pause's end and then some */
    long long calls = th_redis_calls(&r2, "fcall") - calls0;
    printf("# %s: the release answered %ld; W %s (%ld %s); %lld script calls since\n", name, st,
           got ? "answered" : "waits on", got ? p.w[idx[0]].status : 0L,
           got && rw_str(&p.w[idx[0]], "error") ? rw_str(&p.w[idx[0]], "error") : "", calls);
    CHECK_EQ_INT(st, 503);
    if (got == 1) {
        /* The release ran after all (seen under valgrind: Redis ran the
         * dropped connection's release when the pause ended): then W holds
         * the name, granted after it, and A's lease holds nothing. */
        CHECK_EQ_INT(p.w[idx[0]].status, 200);
        long again = release_status(&l, name, lease);
        CHECK(again == 404 || again == 409);
    } else {
        CHECK(calls <= 2); /* W's renewal and acquire, the release never ran */
        int64_t t0 = th_now_ms();
        release(&l, name, lease); /* A still held it */
        CHECK_EQ_INT(pool_poll(&p, 1000 * scale, idx, 1), 1);
        printf("# %s: W granted %lld ms after A's second release\n", name,
               (long long)(th_now_ms() - t0));
        CHECK_EQ_INT(p.w[idx[0]].status, 200);
    }
    release(&l, name, rw_str(&p.w[idx[0]], "lease"));
    pool_free(&p);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&r2);
}

static void session_new(const struct th_lockd *l, int ttl_ms, char *id);

struct bg_release {
    const struct th_lockd *l;
    const char *name, *lease;
    long status;
};

static void *bg_release_run(void *arg)
{
    struct bg_release *b = arg;
    struct th_client *c = th_client_new();
    b->status = th_req(c, "DELETE", th_url(b->l, "/locks/", b->name), NULL, b->lease, NULL);
    th_client_free(c);
    return NULL;
}

/* A rider whose session ends while its release is in flight, answered
 * 503 (Redis frozen, as in release_in_doubt): W is answered 404
 * session_not_found, and the grant the hand-off made when Redis ran the
 * release goes back (ride_back's give-back), so the name is free at once
 * for another client, not held by a lease nobody knows until its 20 s
 * ttl. */
static void test_release_in_doubt_rider_failed(void)
{
    long long scale = th_time_scale();
    const char *name = "doubt-gone";
    struct th_redis r2;
    struct th_lockd l;
    doubt_start(&r2, &l);
    char sid[65], wbody[160], sess[128];
    char lease[40];
    long long t0 = grab(&l, name, "{\"ttl_ms\":20000}", lease);
    session_new(&l, 20000, sid);
    snprintf(wbody, sizeof(wbody), "{\"ttl_ms\":20000,\"wait_ms\":15000,\"session\":\"%s\"}", sid);
    struct pool p;
    park_one(&p, &l, name, wbody);
    th_sleep_ms(200 * scale); /* refused: W waits for the holder's expiry */
    CHECK_EQ_INT(p.ndone, 0);
    kill(r2.pid, SIGSTOP);
    struct bg_release b = {.l = &l, .name = name, .lease = lease};
    pthread_t th;
    pthread_create(&th, NULL, bg_release_run, &b);
    th_sleep_ms(150 * scale); /* the release is in flight, W rides on it */
    snprintf(sess, sizeof(sess), "/sessions/%s", sid);
    long ds = th_req(cl, "DELETE", th_url(&l, sess, ""), NULL, NULL, NULL);
    pthread_join(th, NULL);
    kill(r2.pid, SIGCONT);
    int idx[1];
    int got = pool_poll(&p, 1000 * scale, idx, 1);
    /* the name must be free again within 1 s: try-acquires (no wait) */
    int64_t t1 = th_now_ms();
    long st = 0;
    long long tok = 0;
    char clease[40] = "";
    while (th_now_ms() - t1 < 1000 * scale) {
        struct th_resp r;
        st = th_req(cl, "POST", th_url(&l, "/locks/", name), "{\"ttl_ms\":20000}", NULL, &r);
        if (st == 200) {
            tok = th_jint(&r, "fencing_token");
            snprintf(clease, sizeof(clease), "%s", th_jstr(&r, "lease"));
        }
        th_resp_free(&r);
        if (st != 409)
            break;
        th_sleep_ms(20);
    }
    printf(
        "# %s: session end %ld, the release %ld, W %s (%ld %s); a new acquire %ld after %lld ms\n",
        name, ds, b.status, got ? "answered" : "not answered", got ? p.w[idx[0]].status : 0L,
        got && rw_err(&p.w[idx[0]]) ? rw_err(&p.w[idx[0]]) : "", st, (long long)(th_now_ms() - t1));
    CHECK(ds == 200 || ds == 204);
    CHECK_EQ_INT(b.status, 503);
    CHECK_EQ_INT(got, 1);
    CHECK_EQ_INT(p.w[idx[0]].status, 404);
    CHECK_STR(rw_err(&p.w[idx[0]]), "session_not_found");
    CHECK_EQ_INT(st, 200);
    CHECK(tok > t0);
    if (st == 200)
        release(&l, name, clease);
    pool_free(&p);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&r2);
}

/* Acquires answered 503 while their scripts still run (Redis frozen past
 * backend_timeout_ms, as in release_in_doubt): a try-acquire and a waiting
 * acquire (its first attempt, attempt_done), both on free names. When Redis
 * resumes it grants both leases, which no client knows; lockd gives each
 * back (engine_acquire_in_doubt), so both names are free again within 1 s,
 * not held until the 20 s ttl. */
static void test_acquire_in_doubt_given_back(void)
{
    long long scale = th_time_scale();
    const char *names[2] = {"doubt-try", "doubt-wait"};
    struct th_redis r2;
    struct th_lockd l;
    doubt_start(&r2, &l);
    long long calls0 = th_redis_calls(&r2, "fcall");
    struct pool p;
    pool_init(&p, 2);
    kill(r2.pid, SIGSTOP);
    pool_add(&p, &l, names[0], "{\"ttl_ms\":20000}");
    pool_add(&p, &l, names[1], "{\"ttl_ms\":20000,\"wait_ms\":15000}");
    pool_drain(&p, 3000 * scale);
    kill(r2.pid, SIGCONT);
    int64_t t1 = th_now_ms();
    int nfree = th_until_free(cl, &l, names, 2, t1, 1000);
    long long calls = th_redis_calls(&r2, "fcall") - calls0;
    printf("# acquires answered %d, %d; then %d of 2 names free %lld ms after Redis resumed; %lld "
           "script calls\n",
           p.w[0].status, p.w[1].status, nfree, (long long)(th_now_ms() - t1), calls);
    CHECK_EQ_INT(p.ndone, 2);
    CHECK_EQ_INT(p.w[0].status, 503);
    CHECK_EQ_INT(p.w[1].status, 503);
    CHECK_EQ_INT(nfree, 2);
    pool_free(&p);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&r2);
}

/* 2,000 waiters on one name, handed the lock one at a time: each granted
 * exactly once, never two at a time, tokens strictly increasing; the gauge
 * follows the queue and the handoff histogram counts every handoff. */
static void test_2000_waiters(void)
{
    enum { N = 2000 };
    char lease[40];
    long long last = grab(&la, "many", "{\"ttl_ms\":30000}", lease);
    double h0 = metric(&la, "lockd_handoff_seconds_count");
    struct pool p;
    pool_init(&p, N);
    for (int i = 0; i < N; i++)
        pool_add(&p, &la, "many", "{\"wait_ms\":50000,\"ttl_ms\":30000}");
    wait_queued(&la, "many", N, 10000);
    CHECK_EQ_INT((long long)metric(&la, "lockd_waiters"), N);
    CHECK_EQ_INT(p.ndone, 0);
    int64_t t0 = th_now_ms();
    release(&la, "many", lease);
    for (int k = 0; k < N; k++) {
        int i = one_grant(&p, 5000);
        long long t = rw_int(&p.w[i], "fencing_token");
        if (t <= last)
            th_fail(__FILE__, __LINE__, "grant %d: token %lld after %lld", k, t, last);
        last = t;
        if (k == N / 2) { /* the queue stands still while we hold the lock */
            CHECK_EQ_INT((long long)metric(&la, "lockd_waiters"), N - k - 1);
            CHECK_EQ_INT(queued(&la, "many"), N - k - 1);
        }
        /* The grant is real: its lease releases the lock (compare-and-delete). */
        long s = release_status(&la, "many", rw_str(&p.w[i], "lease"));
        if (s != 200)
            th_fail(__FILE__, __LINE__, "grant %d: release answered %ld", k, s);
    }
    int64_t dt = th_now_ms() - t0;
    CHECK_EQ_INT(p.ndone, N);
    CHECK(pool_poll(&p, 50, NULL, 0) == 0);
    double h1 = metric(&la, "lockd_handoff_seconds_count");
    printf("# 2000 waiters handed off in %lld ms (%.0f us each); handoff histogram +%.0f\n",
           (long long)dt, 1000.0 * (double)dt / N, h1 - h0);
    CHECK(h1 - h0 >= N);
    CHECK_EQ_INT((long long)metric(&la, "lockd_waiters"), 0);
    CHECK_EQ_INT(queued(&la, "many"), 0);
    pool_free(&p);
}

/* 10,000 waiters on one lockd: no thread each, all answered, lockd healthy. */
static void test_10000_waiters(void)
{
    enum { N = 10000 };
    struct th_lockd lm;
    const char *args[] = {"--threads", "2", "--max_connections", "12000", NULL};
    start_lockd(&lm, false, args);
    int threads0 = lockd_threads(&lm);
    CHECK(threads0 > 0);
    char lease[40];
    grab(&lm, "tenk", "{\"ttl_ms\":30000}", lease);
    struct pool p;
    pool_init(&p, N);
    int64_t t0 = th_now_ms();
    for (int i = 0; i < N; i++) {
        pool_add(&p, &lm, "tenk", "{\"wait_ms\":6000,\"ttl_ms\":30000}");
        if (i % 1000 == 999)
            wait_queued(&lm, "tenk", i + 1, 5000); /* stay within the accept backlog */
    }
    int64_t tq = th_now_ms() - t0;
    wait_queued(&lm, "tenk", N, 5000);
    CHECK_EQ_INT((long long)metric(&lm, "lockd_waiters"), N);
    int threads1 = lockd_threads(&lm);
    printf("# 10000 waiters queued in %lld ms; lockd threads %d before, %d with them\n",
           (long long)tq, threads0, threads1);
    CHECK_EQ_INT(threads1, threads0);
    CHECK_EQ_INT(p.ndone, 0);
    /* A few handoffs at the front, then the rest time out. */
    release(&lm, "tenk", lease);
    int fifth = -1;
    for (int k = 0; k < 5; k++) {
        int i = one_grant(&p, 2000);
        if (k < 4) /* the fifth keeps the lock while the rest time out */
            release(&lm, "tenk", rw_str(&p.w[i], "lease"));
        else
            fifth = i;
    }
    pool_drain(&p, 15000);
    CHECK_EQ_INT(p.ndone, N);
    int ok = 0, locked = 0;
    int64_t late = 0;
    for (int i = 0; i < N; i++) {
        struct rw *w = &p.w[i];
        CHECK(!w->broken);
        if (w->status == 200) {
            ok++;
        } else {
            if (w->t_done - w->t_sent - 6000 > late)
                late = w->t_done - w->t_sent - 6000;
            CHECK_EQ_INT(w->status, 409);
            CHECK_STR(rw_err(w), "locked");
            CHECK(rw_int(w, "waited_ms") >= 5900);
            locked++;
        }
    }
    printf("# 10000 waiters: %d granted, %d timed out (at most %lld ms late); all answered "
           "%lld ms after the first was sent\n",
           ok, locked, (long long)late, (long long)(th_now_ms() - t0));
    CHECK_EQ_INT(ok, 5);
    CHECK_EQ_INT((long long)metric(&lm, "lockd_waiters"), 0);
    CHECK_EQ_INT(lockd_threads(&lm), threads0);
    struct th_resp r;
    th_http(cl, "GET", th_url(&lm, "/healthz", ""), NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    release(&lm, "tenk", rw_str(&p.w[fifth], "lease"));
    grab(&lm, "tenk", "{\"ttl_ms\":1000}", lease); /* still serving the name */
    release(&lm, "tenk", lease);
    pool_free(&p);
    th_lockd_kill(&lm, SIGKILL);
}

static void session_new(const struct th_lockd *l, int ttl_ms, char *id)
{
    struct th_resp r;
    char body[64];
    snprintf(body, sizeof(body), "{\"ttl_ms\":%d}", ttl_ms);
    th_http(cl, "POST", th_url(l, "/sessions", ""), body, NULL, &r);
    CHECK_EQ_INT(r.status, 201);
    snprintf(id, 65, "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
}

/* Waiters whose session expires get 404 session_not_found, whether at the
 * head or further back (300 of them behind a plain waiter, who keeps its
 * place); wait_ms running out behind others gets 409. */
static void test_session_and_timeout(const struct th_lockd *l)
{
    enum { BACK = 300 };
    char lease[40], sid[65], body[160];
    grab(l, "sx", "{\"ttl_ms\":30000}", lease);
    session_new(l, 1000, sid);
    struct pool p;
    pool_init(&p, BACK + 4);
    snprintf(body, sizeof(body), "{\"wait_ms\":10000,\"session\":\"%s\"}", sid);
    int head = pool_add(&p, l, "sx", body);
    wait_queued(l, "sx", 1, 3000);
    /* 60 s: it must still be waiting after the session's waiters are gone,
     * however slowly a sanitizer build queues the 300 behind it. */
    int plain = pool_add(&p, l, "sx", "{\"wait_ms\":60000}");
    wait_queued(l, "sx", 2, 3000);
    for (int i = 0; i < BACK; i++)
        pool_add(&p, l, "sx", body);
    wait_queued(l, "sx", BACK + 2, 3000);
    CHECK_EQ_INT((long long)metric(l, "lockd_waiters"), BACK + 2);
    pool_drain(&p, 3000);
    CHECK_EQ_INT(p.ndone, BACK + 1);
    CHECK(!p.w[plain].done);
    for (int i = 0; i < p.n; i++) {
        if (i == plain)
            continue;
        CHECK_EQ_INT(p.w[i].status, 404);
        CHECK_STR(rw_err(&p.w[i]), "session_not_found");
        CHECK(p.w[i].t_done - p.w[head].t_sent <= 2500);
    }
    CHECK_EQ_INT(queued(l, "sx"), 1);
    CHECK_EQ_INT((long long)metric(l, "lockd_waiters"), 1);

    /* wait_ms 500 behind the plain waiter: 409 at 500 ms with waited_ms and
     * the holder, and the waiter in front keeps its place. */
    int idx[4];
    int shortw = pool_add(&p, l, "sx", "{\"wait_ms\":500}");
    int k = pool_poll(&p, 2000, idx, 4);
    CHECK_EQ_INT(k, 1);
    CHECK_EQ_INT(idx[0], shortw);
    struct rw *w = &p.w[shortw];
    CHECK_EQ_INT(w->status, 409);
    CHECK_STR(rw_err(w), "locked");
    long long waited = rw_int(w, "waited_ms");
    int64_t took = w->t_done - w->t_sent;
    printf("# wait_ms 500 behind a waiter: 409 after %lld ms, waited_ms %lld\n", (long long)took,
           waited);
    CHECK(waited >= 490 && waited <= 600);
    CHECK(took >= 400 && took <= 600); /* 500 ms ± 100 */
    json_t *holder = json_object_get(w->json, "holder");
    CHECK(json_is_object(holder));
    CHECK(json_integer_value(json_object_get(holder, "expires_in_ms")) > 0);
    CHECK_EQ_INT(queued(l, "sx"), 1);
    release(l, "sx", lease);
    int i = one_grant(&p, 2000);
    CHECK_EQ_INT(i, plain);
    release(l, "sx", rw_str(&p.w[i], "lease"));
    CHECK_EQ_INT((long long)metric(l, "lockd_waiters"), 0);
    pool_free(&p);
}

static void test_session_and_timeout_memory(void)
{
    struct th_lockd lm;
    start_lockd(&lm, false, NULL);
    test_session_and_timeout(&lm);
    th_lockd_kill(&lm, SIGKILL);
}

static void test_session_and_timeout_redis(void)
{
    test_session_and_timeout(&lb);
}

/* max_waiters reached: a blocking acquire is tried once instead of parked.
 * A held lock answers 409 at once, with the holder and Retry-After like any
 * refusal; a free lock is still granted. */
static void test_max_waiters(void)
{
    struct th_lockd lm;
    const char *args[] = {"--max_waiters", "2", NULL};
    start_lockd(&lm, false, args);
    char lease[40], lease2[40];
    long long tok = grab(&lm, "mw", "{\"ttl_ms\":30000,\"owner\":\"mw-holder\"}", lease);
    struct pool p;
    pool_init(&p, 2);
    pool_add(&p, &lm, "mw", "{\"wait_ms\":20000}");
    wait_queued(&lm, "mw", 1, 3000); /* queued in a known order */
    pool_add(&p, &lm, "mw", "{\"wait_ms\":20000}");
    wait_queued(&lm, "mw", 2, 3000);

    struct th_resp r;
    int64_t t0 = th_now_ms();
    th_http(cl, "POST", th_url(&lm, "/locks/", "mw"), "{\"wait_ms\":5000}", NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK_STR(th_jerr(&r), "locked");
    CHECK(th_now_ms() - t0 < 2000); /* not parked for its 5 s */
    json_t *h = json_object_get(r.json, "holder");
    CHECK(json_is_object(h));
    CHECK_STR(json_string_value(json_object_get(h, "owner")), "mw-holder");
    CHECK_EQ_INT(json_integer_value(json_object_get(h, "fencing_token")), tok);
    CHECK(th_header(&r, "Retry-After") != NULL);
    th_resp_free(&r);

    /* A free name is granted at once although the waiter table is full. */
    th_http(cl, "POST", th_url(&lm, "/locks/", "mw-free"), "{\"wait_ms\":5000}", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    snprintf(lease2, sizeof(lease2), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    CHECK(lease2[0] != '\0');

    /* The two parked waiters are still served in order. */
    release(&lm, "mw", lease);
    int first = one_grant(&p, 3000);
    CHECK_EQ_INT(first, 0);
    pool_free(&p);
    th_lockd_kill(&lm, SIGKILL);
}

/* SIGTERM answers every waiter 503 shutting_down at once (a session keeps
 * the draining lockd up meanwhile), however many there are. */
static void test_drain(void)
{
    enum { N = 300 };
    struct th_lockd lm;
    start_lockd(&lm, false, NULL);
    char lease[40], sid[65];
    grab(&lm, "dr", "{\"ttl_ms\":30000}", lease);
    session_new(&lm, 30000, sid);
    struct pool p;
    pool_init(&p, N);
    grab(&lm, "dr2", "{\"ttl_ms\":30000}", lease);
    for (int i = 0; i < N; i++)
        pool_add(&p, &lm, i % 3 ? "dr" : "dr2", "{\"wait_ms\":20000}");
    wait_queued(&lm, "dr", N - N / 3, 3000);
    int64_t t0 = th_now_ms();
    kill(lm.pid, SIGTERM);
    pool_drain(&p, 3000);
    printf("# drain: %d of %d waiters answered in %lld ms\n", p.ndone, N,
           (long long)(th_now_ms() - t0));
    CHECK_EQ_INT(p.ndone, N);
    for (int i = 0; i < N; i++) {
        CHECK_EQ_INT(p.w[i].status, 503);
        CHECK_STR(rw_err(&p.w[i]), "shutting_down");
    }
    pool_free(&p);
    th_lockd_kill(&lm, SIGKILL);
}

/* Without a session nothing keeps the draining lockd up: it stops at once,
 * and must still answer every parked waiter (libmicrohttpd aborts when a
 * daemon is stopped with suspended connections) and exit 0. */
static void test_drain_stop_now(void)
{
    enum { N = 200 };
    struct th_lockd lm;
    start_lockd(&lm, false, NULL);
    char lease[40];
    grab(&lm, "ds", "{\"ttl_ms\":30000}", lease);
    struct pool p;
    pool_init(&p, N);
    for (int i = 0; i < N; i++)
        pool_add(&p, &lm, "ds", "{\"wait_ms\":20000}");
    wait_queued(&lm, "ds", N, 3000);
    kill(lm.pid, SIGTERM);
    pool_drain(&p, 3000);
    CHECK_EQ_INT(p.ndone, N);
    for (int i = 0; i < N; i++)
        CHECK_EQ_INT(p.w[i].status, 503);
    CHECK_EQ_INT(th_lockd_signal_wait(&lm, 0, 5000), 0);
    pool_free(&p);
}

/* SIGTERM to lockd l (no session open): it must be gone, exit 0, within
 * 500 ms (a sidecar's pod waits on it); returns how long it took. */
static int64_t term_exits_promptly(struct th_lockd *l, const char *what)
{
    int64_t bound_ms = 500 * th_time_scale();
    int64_t t0 = th_now_ms();
    int code = th_lockd_signal_wait(l, SIGTERM, 10000 * th_time_scale());
    int64_t took = th_now_ms() - t0;
    printf("# %s: exited %d, %lld ms after SIGTERM\n", what, code, (long long)took);
    if (code < 0)
        th_lockd_kill(l, SIGKILL);
    CHECK_EQ_INT(code, 0);
    if (took >= bound_ms)
        th_fail(__FILE__, __LINE__, "%s exited %lld ms after SIGTERM (bound %lld ms)", what,
                (long long)took, (long long)bound_ms);
    return took;
}

/* An idle lockd, and one with a long-poll waiter parked behind a held lock,
 * exit promptly on SIGTERM, on memory and on Redis (pub/sub subscribed for
 * the waiter). The waiter is answered 503 shutting_down first. */
static void test_sigterm_exits_promptly(void)
{
    for (int redis = 0; redis <= 1; redis++) {
        const char *be = redis ? "redis" : "memory";
        char what[64];
        struct th_lockd l;
        start_lockd(&l, redis, NULL);
        snprintf(what, sizeof(what), "idle lockd (%s)", be);
        term_exits_promptly(&l, what);

        start_lockd(&l, redis, NULL);
        char lease[40];
        grab(&l, "term", "{\"ttl_ms\":30000}", lease);
        struct pool p;
        park_one(&p, &l, "term", "{\"wait_ms\":20000}");
        snprintf(what, sizeof(what), "lockd with a waiter (%s)", be);
        term_exits_promptly(&l, what);
        pool_drain(&p, 3000);
        CHECK_EQ_INT(p.ndone, 1);
        CHECK_EQ_INT(p.w[0].status, 503);
        CHECK_STR(rw_err(&p.w[0]), "shutting_down");
        pool_free(&p);
    }
}

/* Backend acquire attempts per handoff with 16 waiters (benchmark-ish, from
 * Redis commandstats). Every acquire attempt runs one GET inside its script,
 * every release a GET and a DEL: attempts = GETs - DELs, however many
 * attempts one EVALSHA carried. */
static double attempts_per_handoff(int nlockd)
{
    enum { N = 16 };
    char lease[40];
    const char *name = nlockd == 1 ? "bench1" : "bench2";
    grab(&la, name, "{\"ttl_ms\":30000}", lease);
    struct pool p;
    pool_init(&p, N);
    for (int i = 0; i < N; i++)
        pool_add(&p, nlockd == 2 && i % 2 ? &lb : &la, name, "{\"wait_ms\":20000}");
    wait_queued(&la, name, nlockd == 1 ? N : N / 2, 3000);
    if (nlockd == 2)
        wait_queued(&lb, name, N / 2, 3000);
    th_sleep_ms(50);
    long long g0 = th_redis_calls(&rd, "get"), d0 = th_redis_calls(&rd, "del");
    release(&la, name, lease);
    for (int k = 0; k < N; k++) {
        int i = one_grant(&p, 5000);
        release(&la, name, rw_str(&p.w[i], "lease"));
    }
    long long del = th_redis_calls(&rd, "del") - d0;
    long long attempts = th_redis_calls(&rd, "get") - g0 - del;
    CHECK_EQ_INT(del, N + 1); /* each release ran its script once */
    double ratio = (double)attempts / N;
    printf("# %d waiters on %d lockd: %lld acquire attempts for %d handoffs = %.2f each\n", N,
           nlockd, attempts, N, ratio);
    pool_free(&p);
    return ratio;
}

static void test_attempts_per_handoff(void)
{
    CHECK(attempts_per_handoff(1) <= 2.0);
    CHECK(attempts_per_handoff(2) <= 2.5);
}

int main(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < 10100) {
        fprintf(stderr, "waiting: RLIMIT_NOFILE hard limit %llu is below 10100\n",
                (unsigned long long)rl.rlim_cur);
        return 1;
    }
    th_redis_start(&rd, 0, NULL);
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", rd.port);
    const char *args[] = {"--max_connections", "5000", NULL};
    start_lockd(&la, true, args);
    start_lockd(&lb, true, args);
    cl = th_client_new();

    TH_RUN(test_cross_lockd_handoff);
    TH_RUN(test_handoff_behind_own_waiter);
    TH_RUN(test_no_polling_storm);
    TH_RUN(test_subscription_churn);
    TH_RUN(test_resubscribe_race);
    TH_RUN(test_lost_message);
    TH_RUN(test_ride_keeps_wakeup);
    TH_RUN(test_ride_keeps_wakeup_semaphore);
    TH_RUN(test_release_in_doubt_exclusive);
    TH_RUN(test_release_in_doubt_reader);
    TH_RUN(test_release_in_doubt_semaphore);
    TH_RUN(test_release_in_doubt_lost);
    TH_RUN(test_release_in_doubt_rider_failed);
    TH_RUN(test_acquire_in_doubt_given_back);
    TH_RUN(test_session_and_timeout_redis);
    TH_RUN(test_session_and_timeout_memory);
    TH_RUN(test_attempts_per_handoff);
    TH_RUN(test_2000_waiters);
    TH_RUN(test_10000_waiters);
    TH_RUN(test_max_waiters);
    TH_RUN(test_drain);
    TH_RUN(test_drain_stop_now);
    TH_RUN(test_sigterm_exits_promptly);

    th_client_free(cl);
    th_lockd_kill(&la, SIGKILL);
    th_lockd_kill(&lb, SIGKILL);
    th_redis_stop(&rd);
    return th_done();
}
