/*
 * operators.c - issue 26 through real lockd and redis-server processes:
 * force-unlock (401 without a token, 403 with a client token or without
 * admin_token_file, 200 with an admin token; every shared holder goes; the
 * former holder's session, on another lockd of the same Redis, reports the
 * name in `lost`; lockd_forced_releases_total moves; a warn line names the
 * request id and the peer) and watching (index, Lock-Index, the index in
 * listings, long polls woken by a release through another lockd and by an
 * expiry, an unchanged name answering after wait_ms; a renewal that shortens
 * the lease wakes a watcher and a waiter at the new expiry, on this lockd and
 * on another of the same Redis).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"

static struct th_redis rd;
static char redis_url[64];
static struct th_lockd mem, ra, rb, noadm; /* memory; two lockd on one Redis; no admin file */
static struct th_client *cl;
static char client_hdr[64], admin_hdr[64];

/* A request with the client token; status out, body kept in *out. */
static long call(const char *method, const char *u, const char *body, const char *auth,
                 struct th_resp *out)
{
    const char *hdrs[] = {auth, NULL};
    th_http(cl, method, u, body, auth != NULL ? hdrs : NULL, out);
    return out->status;
}

static long long metric(const struct th_lockd *l, const char *name)
{
    struct th_resp r;
    call("GET", th_url(l, "/metrics", ""), NULL, client_hdr, &r);
    long long v = -1;
    char line[128];
    snprintf(line, sizeof(line), "\n%s ", name); /* the sample, not its # HELP */
    const char *p = r.body != NULL ? strstr(r.body, line) : NULL;
    if (p != NULL)
        v = atoll(p + strlen(line));
    th_resp_free(&r);
    return v;
}

/* ---------------------------------------------------------------- force-unlock */

static long long index_of(const struct th_lockd *l, const char *name);

/* Some line of l's log holds all three strings (waits up to 5 s for it). */
static bool log_has(const struct th_lockd *l, const char *a, const char *b, const char *c)
{
    for (int i = 0; i < 50; i++) {
        FILE *f = fopen(l->log, "r");
        char line[2048];
        bool found = false;
        while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
            found = strstr(line, a) != NULL && strstr(line, b) != NULL && strstr(line, c) != NULL;
        if (f != NULL)
            fclose(f);
        if (found)
            return true;
        th_sleep_ms(100);
    }
    return false;
}

static void force_on(const struct th_lockd *holder, const struct th_lockd *op, const char *name)
{
    struct th_resp r;
    /* a session-bound holder whose lease the watchdog renews every 200 ms */
    CHECK_EQ_INT(call("POST", th_url(holder, "/sessions", ""), "{\"ttl_ms\":5000}", client_hdr, &r),
                 201);
    char sess[40], lease[40], body[160];
    snprintf(sess, sizeof(sess), "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
    snprintf(body, sizeof(body), "{\"ttl_ms\":600,\"session\":\"%s\"}", sess);
    CHECK_EQ_INT(call("POST", th_url(holder, "/locks/", name), body, client_hdr, &r), 200);
    snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
    long long token = th_jint(&r, "fencing_token");
    th_resp_free(&r);

    long long before = metric(op, "lockd_forced_releases_total");
    char path[300];
    snprintf(path, sizeof(path), "%s?force=true", name);
    CHECK_EQ_INT(call("DELETE", th_url(op, "/locks/", path), NULL, NULL, &r), 401);
    CHECK_STR(th_jerr(&r), "unauthorized");
    th_resp_free(&r);
    CHECK_EQ_INT(call("DELETE", th_url(op, "/locks/", path), NULL, client_hdr, &r), 403);
    CHECK_STR(th_jerr(&r), "forbidden");
    th_resp_free(&r);
    snprintf(path, sizeof(path), "%s?force=maybe", name);
    CHECK_EQ_INT(call("DELETE", th_url(op, "/locks/", path), NULL, admin_hdr, &r), 400);
    th_resp_free(&r);
    /* A force takes no lease, however it is sent: each is refused alike and
     * the holder keeps the lock. */
    char lq[360], lhdr[80], lb[80];
    snprintf(lq, sizeof(lq), "%s?force=true&lease=%s", name, lease);
    snprintf(lhdr, sizeof(lhdr), "Lock-Lease: %s", lease);
    snprintf(lb, sizeof(lb), "{\"lease\":\"%s\"}", lease);
    snprintf(path, sizeof(path), "%s?force=true", name);
    const char *with_hdr[] = {admin_hdr, lhdr, NULL};
    for (int k = 0; k < 3; k++) {
        th_http(cl, "DELETE", th_url(op, "/locks/", k == 0 ? lq : path), k == 2 ? lb : NULL,
                k == 1 ? with_hdr : (const char *[]){admin_hdr, NULL}, &r);
        CHECK_EQ_INT(r.status, 400);
        CHECK_STR(th_jerr(&r), "invalid_field");
        CHECK_STR(th_jstr(&r, "message"), "a forced release takes no lease");
        th_resp_free(&r);
    }
    CHECK_EQ_INT(metric(op, "lockd_forced_releases_total"), before);

    long long i0 = index_of(holder, name);
    snprintf(path, sizeof(path), "%s?force=true", name);
    CHECK_EQ_INT(call("DELETE", th_url(op, "/locks/", path), NULL, admin_hdr, &r), 200);
    CHECK(json_is_true(json_object_get(r.json, "released")));
    CHECK(json_is_true(json_object_get(r.json, "forced")));
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), token);
    char want[200];
    const char *rid = th_header(&r, "X-Request-Id");
    CHECK(rid != NULL);
    snprintf(want, sizeof(want), "(request %s from 127.0.0.1:", rid != NULL ? rid : "?");
    th_resp_free(&r);
    /* logged at warn with the request id and the operator's address */
    char what[200];
    snprintf(what, sizeof(what), "force-unlocked '%s' token %lld", name, token);
    CHECK(log_has(op, "\"level\":\"warn\"", what, want));
    CHECK(index_of(holder, name) > i0); /* a forced release moves the index */
    CHECK_EQ_INT(metric(op, "lockd_forced_releases_total"), before + 1);
    CHECK_EQ_INT(call("DELETE", th_url(op, "/locks/", path), NULL, admin_hdr, &r), 404);
    CHECK_STR(th_jerr(&r), "not_held");
    /* the operator sent no lease: the message does not speak of one */
    CHECK(th_jstr(&r, "message") != NULL && strstr(th_jstr(&r, "message"), "lease") == NULL);
    th_resp_free(&r);
    CHECK_EQ_INT(metric(op, "lockd_forced_releases_total"), before + 1);

    /* no lock-delay: free at once */
    CHECK_EQ_INT(call("POST", th_url(op, "/locks/", name), "{\"ttl_ms\":5000}", client_hdr, &r),
                 200);
    char other[40];
    snprintf(other, sizeof(other), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);

    /* the former holder's session reports it lost at its next renewal */
    bool lost = false;
    for (int i = 0; i < 100 && !lost; i++) {
        CHECK_EQ_INT(call("GET", th_url(holder, "/sessions/", sess), NULL, client_hdr, &r), 200);
        json_t *l = json_object_get(r.json, "lost");
        for (size_t k = 0; k < json_array_size(l); k++)
            lost |= strcmp(json_string_value(json_array_get(l, k)), name) == 0;
        th_resp_free(&r);
        if (!lost)
            th_sleep_ms(20);
    }
    CHECK(lost);
    /* and its own renew fails */
    char lh[80];
    snprintf(lh, sizeof(lh), "Lock-Lease: %s", lease);
    const char *hdrs[] = {client_hdr, lh, NULL};
    th_http(cl, "PUT", th_url(holder, "/locks/", name), NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 409);
    th_resp_free(&r);
    snprintf(lh, sizeof(lh), "Lock-Lease: %s", other);
    th_http(cl, "DELETE", th_url(op, "/locks/", name), NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    CHECK_EQ_INT(call("DELETE", th_url(holder, "/sessions/", sess), NULL, client_hdr, &r), 200);
    th_resp_free(&r);
}

static void t_force_memory(void)
{
    force_on(&mem, &mem, "force-mem");
}

static void t_force_two_lockd(void)
{
    force_on(&ra, &rb, "force-redis");
}

/* Every holder of a semaphore goes; the token is the highest. */
static void t_force_shared(void)
{
    const struct th_lockd *ls[] = {&mem, &ra};
    for (int k = 0; k < 2; k++) {
        struct th_resp r;
        long long top = 0;
        for (int i = 0; i < 3; i++) {
            CHECK_EQ_INT(call("POST", th_url(ls[k], "/locks/", "force-sem"),
                              "{\"ttl_ms\":5000,\"limit\":3}", client_hdr, &r),
                         200);
            top = th_jint(&r, "fencing_token");
            th_resp_free(&r);
        }
        CHECK_EQ_INT(
            call("DELETE", th_url(ls[k], "/locks/", "force-sem?force=true"), NULL, admin_hdr, &r),
            200);
        CHECK_EQ_INT(th_jint(&r, "fencing_token"), top);
        th_resp_free(&r);
        CHECK_EQ_INT(call("GET", th_url(ls[k], "/locks/", "force-sem"), NULL, client_hdr, &r), 200);
        CHECK(json_is_false(json_object_get(r.json, "held")));
        th_resp_free(&r);
    }
}

/* Without admin_token_file force is refused, even with auth off. */
static void t_force_no_admin_file(void)
{
    struct th_resp r;
    CHECK_EQ_INT(call("POST", th_url(&noadm, "/locks/", "f"), NULL, NULL, &r), 200);
    th_resp_free(&r);
    CHECK_EQ_INT(call("DELETE", th_url(&noadm, "/locks/", "f?force=true"), NULL, admin_hdr, &r),
                 403);
    CHECK_STR(th_jerr(&r), "forbidden");
    th_resp_free(&r);
}

/* ---------------------------------------------------------------- watching */

static long long index_of(const struct th_lockd *l, const char *name)
{
    struct th_resp r;
    CHECK_EQ_INT(call("GET", th_url(l, "/locks/", name), NULL, client_hdr, &r), 200);
    long long v = th_jint(&r, "index");
    const char *h = th_header(&r, "Lock-Index");
    CHECK(h != NULL && atoll(h) == v);
    th_resp_free(&r);
    return v;
}

struct watch_req {
    const struct th_lockd *l;
    const char *name;
    long long index, wait_ms;
    long status;
    long long got_index;
    bool held;
    int64_t answered_ms;
};

static void *watch_thread(void *arg)
{
    struct watch_req *w = arg;
    struct th_client *c = th_client_new();
    char path[300];
    snprintf(path, sizeof(path), "%s?index=%lld&wait_ms=%lld", w->name, w->index, w->wait_ms);
    const char *hdrs[] = {client_hdr, NULL};
    struct th_resp r;
    th_http(c, "GET", th_url(w->l, "/locks/", path), NULL, hdrs, &r);
    w->answered_ms = th_now_ms();
    w->status = r.status;
    w->got_index = th_jint(&r, "index");
    w->held = json_is_true(json_object_get(r.json, "held"));
    th_resp_free(&r);
    th_client_free(c);
    return NULL;
}

/* A watcher on `watcher` is answered within 100 ms of a release made
 * through `releaser`, and of the next holder's expiry. */
static void watch_on(const struct th_lockd *releaser, const struct th_lockd *watcher,
                     const char *name)
{
    struct th_resp r;
    CHECK_EQ_INT(
        call("POST", th_url(releaser, "/locks/", name), "{\"ttl_ms\":30000}", client_hdr, &r), 200);
    char lh[80];
    snprintf(lh, sizeof(lh), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    long long i0 = index_of(watcher, name);
    CHECK_EQ_INT(index_of(releaser, name), i0); /* the same on every lockd */
    /* a listing entry carries it too */
    char lp[300];
    snprintf(lp, sizeof(lp), "?prefix=%s", name);
    CHECK_EQ_INT(call("GET", th_url(watcher, "/locks", lp), NULL, client_hdr, &r), 200);
    json_t *ls = json_object_get(r.json, "locks");
    CHECK_EQ_INT(json_array_size(ls), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(ls, 0), "index")), i0);
    th_resp_free(&r);
    /* a renewal changes nothing */
    const char *hdrs[] = {client_hdr, lh, NULL};
    th_http(cl, "PUT", th_url(releaser, "/locks/", name), NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    CHECK_EQ_INT(index_of(watcher, name), i0);

    struct watch_req w = {watcher, name, i0, 5000, 0, 0, false, 0};
    pthread_t t;
    pthread_create(&t, NULL, watch_thread, &w);
    th_sleep_ms(200); /* parked */
    int64_t t0 = th_now_ms();
    th_http(cl, "DELETE", th_url(releaser, "/locks/", name), NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    pthread_join(t, NULL);
    CHECK_EQ_INT(w.status, 200);
    CHECK(!w.held);
    CHECK(w.got_index > i0);
    printf("    release -> watcher: %lld ms\n", (long long)(w.answered_ms - t0));
    CHECK(w.answered_ms - t0 < 100 * th_time_scale());

    /* an expiry, with no request at all */
    CHECK_EQ_INT(
        call("POST", th_url(releaser, "/locks/", name), "{\"ttl_ms\":400}", client_hdr, &r), 200);
    th_resp_free(&r);
    int64_t granted = th_now_ms();
    struct watch_req x = {watcher, name, index_of(watcher, name), 5000, 0, 0, false, 0};
    watch_thread(&x);
    CHECK_EQ_INT(x.status, 200);
    CHECK(!x.held);
    CHECK(x.got_index > x.index);
    printf("    expiry -> watcher: %lld ms after the ttl\n",
           (long long)(x.answered_ms - granted - 400));
    CHECK(x.answered_ms - granted >= 390);
    CHECK(x.answered_ms - granted < 400 + 100 * th_time_scale());

    /* unchanged: answered after wait_ms with the same index */
    struct watch_req u = {watcher, name, x.got_index, 300, 0, 0, false, 0};
    int64_t s0 = th_now_ms();
    watch_thread(&u);
    CHECK_EQ_INT(u.status, 200);
    CHECK_EQ_INT(u.got_index, x.got_index);
    CHECK(u.answered_ms - s0 >= 290);
    /* a different index answers at once; a grant through the other lockd wakes it too */
    struct watch_req d = {watcher, name, x.got_index + 7, 5000, 0, 0, false, 0};
    s0 = th_now_ms();
    watch_thread(&d);
    CHECK(d.answered_ms - s0 < 1000);
    CHECK_EQ_INT(d.got_index, x.got_index);
    struct watch_req g = {watcher, name, x.got_index, 5000, 0, 0, false, 0};
    pthread_create(&t, NULL, watch_thread, &g);
    th_sleep_ms(200);
    t0 = th_now_ms();
    CHECK_EQ_INT(
        call("POST", th_url(releaser, "/locks/", name), "{\"ttl_ms\":30000}", client_hdr, &r), 200);
    snprintf(lh, sizeof(lh), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    pthread_join(t, NULL);
    CHECK(g.held);
    CHECK(g.got_index > x.got_index);
    CHECK(g.answered_ms - t0 < 100 * th_time_scale());
    th_http(cl, "DELETE", th_url(releaser, "/locks/", name), NULL, hdrs, &r);
    th_resp_free(&r);
}

static void t_watch_memory(void)
{
    watch_on(&mem, &mem, "watch-mem");
}

static void t_watch_two_lockd(void)
{
    watch_on(&ra, &rb, "watch-redis");
}

struct acq_req {
    const struct th_lockd *l;
    const char *name;
    long status;
    char lease[40];
    int64_t answered_ms;
};

static void *acquire_thread(void *arg)
{
    struct acq_req *a = arg;
    struct th_client *c = th_client_new();
    const char *hdrs[] = {client_hdr, NULL};
    struct th_resp r;
    th_http(c, "POST", th_url(a->l, "/locks/", a->name), "{\"wait_ms\":8000}", hdrs, &r);
    a->answered_ms = th_now_ms();
    a->status = r.status;
    snprintf(a->lease, sizeof(a->lease), "%s", r.status == 200 ? th_jstr(&r, "lease") : "");
    th_resp_free(&r);
    th_client_free(c);
    return NULL;
}

/* Grants name on h for 5 s to readers shared holders (one exclusive holder
 * when 0), starts fn(arg) (a watcher or a waiter, parked on its own lockd),
 * then renews every holder for 300 ms through h; returns when. */
static int64_t grant_then_shorten(const struct th_lockd *h, const char *name, int readers,
                                  pthread_t *t, void *(*fn)(void *), void *arg)
{
    struct th_resp r;
    char lh[2][80];
    int n = readers > 0 ? readers : 1;
    for (int i = 0; i < n; i++) {
        const char *body =
            readers > 0 ? "{\"ttl_ms\":5000,\"mode\":\"shared\"}" : "{\"ttl_ms\":5000}";
        CHECK_EQ_INT(call("POST", th_url(h, "/locks/", name), body, client_hdr, &r), 200);
        snprintf(lh[i], sizeof(lh[i]), "Lock-Lease: %s", th_jstr(&r, "lease"));
        th_resp_free(&r);
    }
    if (fn == watch_thread) {
        struct watch_req *w = arg;
        w->index = index_of(w->l, name);
    }
    pthread_create(t, NULL, fn, arg);
    th_sleep_ms(200); /* parked */
    int64_t t0 = th_now_ms();
    for (int i = 0; i < n; i++) {
        const char *hdrs[] = {client_hdr, lh[i], NULL};
        th_http(cl, "PUT", th_url(h, "/locks/", name), "{\"ttl_ms\":300}", hdrs, &r);
        CHECK_EQ_INT(r.status, 200);
        th_resp_free(&r);
    }
    return t0;
}

/* A renewal may shorten a lease (ttl_ms below what is left): the holder then
 * expires sooner, and a watcher or a waiter parked on lockd l hears of it
 * within 100 ms of the new expiry, not at the old one (both did 4.5 s late
 * when only a grant, a release or the expiry first learned made them look
 * again). The holders renew through h: on another lockd of the same Redis
 * the renewal's 'r<ttl>' message tells l (_shared.lua sh_shortened); each
 * of the renewal's forms (an exclusive holder, a lone reader, readers in
 * the set) sends it. Each alone: a waiter's grant would wake the watcher. */
static void renew_shorter_on(const struct th_lockd *h, const struct th_lockd *l, const char *name,
                             int readers)
{
    pthread_t t;
    struct watch_req w = {l, name, 0, 8000, 0, 0, false, 0};
    int64_t t0 = grant_then_shorten(h, name, readers, &t, watch_thread, &w);
    pthread_join(t, NULL);
    printf("    %d readers renewed for 300 ms -> watcher answered after %lld ms\n", readers,
           (long long)(w.answered_ms - t0));
    CHECK_EQ_INT(w.status, 200);
    CHECK(!w.held);
    CHECK(w.got_index > w.index);
    CHECK(w.answered_ms - t0 >= 290);
    CHECK(w.answered_ms - t0 < 300 + 100 * th_time_scale());

    struct acq_req a = {l, name, 0, "", 0};
    t0 = grant_then_shorten(h, name, readers, &t, acquire_thread, &a);
    pthread_join(t, NULL);
    printf("    %d readers renewed for 300 ms -> waiter granted after %lld ms\n", readers,
           (long long)(a.answered_ms - t0));
    CHECK_EQ_INT(a.status, 200);
    CHECK(a.answered_ms - t0 >= 290);
    CHECK(a.answered_ms - t0 < 300 + 100 * th_time_scale());
    char lh[80];
    snprintf(lh, sizeof(lh), "Lock-Lease: %s", a.lease);
    const char *hdrs[] = {client_hdr, lh, NULL};
    struct th_resp r;
    th_http(cl, "DELETE", th_url(l, "/locks/", name), NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
}

static void t_renew_shorter_memory(void)
{
    renew_shorter_on(&mem, &mem, "shorter-mem", 0);
    renew_shorter_on(&mem, &mem, "shorter-mem-r2", 2);
}

static void t_renew_shorter_redis(void)
{
    renew_shorter_on(&ra, &ra, "shorter-redis", 0);
}

static void t_renew_shorter_two_lockd(void)
{
    renew_shorter_on(&ra, &rb, "shorter-two", 0);
    renew_shorter_on(&ra, &rb, "shorter-two-r1", 1);
    renew_shorter_on(&ra, &rb, "shorter-two-r2", 2);
}

static void t_watch_bad_input(void)
{
    struct th_resp r;
    const char *bad[] = {"w?index=x&wait_ms=10",
                         "w?index=1&wait_ms=-1",
                         "w?index=1&wait_ms=300001",
                         "w?index=9007199254740992&wait_ms=1",
                         "w?indx=1",
                         NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        call("GET", th_url(&mem, "/locks/", bad[i]), NULL, client_hdr, &r);
        CHECK_EQ_INT(r.status, 400);
        th_resp_free(&r);
    }
}

static long long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    CHECK(p != NULL);
    long long ut = 0, st = 0;
    /* fields after the name: state(3) ... utime(14) stime(15) */
    CHECK(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &ut, &st) == 2);
    return ut + st;
}

/* 1,000 watchers of one name (on one Redis lockd): no CPU while idle, all
 * woken by one release made through the other lockd. */
static void t_watch_thousand(void)
{
    enum { N = 1000 };
    struct th_resp r;
    CHECK_EQ_INT(
        call("POST", th_url(&ra, "/locks/", "watch-many"), "{\"ttl_ms\":60000}", client_hdr, &r),
        200);
    char lh[80];
    snprintf(lh, sizeof(lh), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    long long idx = index_of(&rb, "watch-many");
    static int fds[N];
    char req[512];
    snprintf(req, sizeof(req),
             "GET /locks/watch-many?index=%lld&wait_ms=60000 HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n",
             idx, client_hdr);
    for (int i = 0; i < N; i++) {
        fds[i] = th_connect(rb.port);
        CHECK(write(fds[i], req, strlen(req)) == (ssize_t)strlen(req));
    }
    th_sleep_ms(500); /* all parked */
    long long c0 = cpu_ticks(rb.pid);
    th_sleep_ms(5000);
    long long used = cpu_ticks(rb.pid) - c0;
    long hz = sysconf(_SC_CLK_TCK);
    printf("    lockd CPU over 5 s idle with %d watchers: %lld ms\n", N, used * 1000 / hz);
    CHECK(used * 1000 / hz <= 50); /* 1 % of one core at most */
    const char *hdrs[] = {client_hdr, lh, NULL};
    int64_t t0 = th_now_ms();
    th_http(cl, "DELETE", th_url(&ra, "/locks/", "watch-many"), NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    static char body[4096];
    for (int i = 0; i < N; i++) {
        CHECK_EQ_INT(th_raw_response(fds[i], body, sizeof(body)), 200);
        CHECK(strstr(body, "\"held\":false") != NULL || strstr(body, "\"held\": false") != NULL);
        close(fds[i]);
    }
    printf("    1000 watchers answered %lld ms after the release\n", (long long)(th_now_ms() - t0));
    CHECK(th_now_ms() - t0 < 2000 * th_time_scale());
}

int main(void)
{
    th_redis_start(&rd, 0, NULL);
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", rd.port);
    char ctok[300], atok[300];
    snprintf(ctok, sizeof(ctok), "%s/client.tok", th_tmpdir());
    snprintf(atok, sizeof(atok), "%s/admin.tok", th_tmpdir());
    FILE *f = fopen(ctok, "w");
    CHECK(f != NULL);
    fputs("client-secret\n", f);
    fclose(f);
    f = fopen(atok, "w");
    CHECK(f != NULL);
    fputs("# operators\nadmin-secret\n", f);
    fclose(f);
    snprintf(client_hdr, sizeof(client_hdr), "Authorization: Bearer client-secret");
    snprintf(admin_hdr, sizeof(admin_hdr), "Authorization: Bearer admin-secret");
    const char *margs[] = {"--backend", "memory", "--auth_token_file", ctok, "--admin_token_file",
                           atok,        NULL};
    const char *rargs[] = {
        "--backend",          "redis", "--redis", redis_url, "--auth_token_file", ctok,
        "--admin_token_file", atok,    NULL};
    const char *nargs[] = {"--backend", "memory", NULL};
    th_lockd_start(&mem, margs, NULL);
    th_lockd_start(&ra, rargs, NULL);
    th_lockd_start(&rb, rargs, NULL);
    th_lockd_start(&noadm, nargs, NULL);
    cl = th_client_new();

    TH_RUN(t_force_memory);
    TH_RUN(t_force_two_lockd);
    TH_RUN(t_force_shared);
    TH_RUN(t_force_no_admin_file);
    TH_RUN(t_watch_memory);
    TH_RUN(t_watch_two_lockd);
    TH_RUN(t_renew_shorter_memory);
    TH_RUN(t_renew_shorter_redis);
    TH_RUN(t_renew_shorter_two_lockd);
    TH_RUN(t_watch_bad_input);
    TH_RUN(t_watch_thousand);

    th_client_free(cl);
    th_lockd_kill(&mem, SIGKILL);
    th_lockd_kill(&ra, SIGKILL);
    th_lockd_kill(&rb, SIGKILL);
    th_lockd_kill(&noadm, SIGKILL);
    th_redis_stop(&rd);
    return th_done();
}
