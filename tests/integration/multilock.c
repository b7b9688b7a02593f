/*
 * multilock.c - multi-locks (issue 26, DESIGN.md §2 "Multi-lock") through
 * real lockd processes: a set of 10 names against a holder of one is
 * refused whole (nothing of it held), and a waiting one is granted whole on
 * that holder's release (memory; Redis across two lockd; Redlock, the
 * ordered path); 32 clients taking random overlapping sets for 5 s never
 * deadlock and never overlap (a register per name, shared by the clients);
 * on one Redis a set is one script call; renewing and releasing a set
 * names what was lost; members work alone through /locks/{name}; a
 * session's watchdog keeps members alive; a set promoted to the head of a
 * queue is granted at once; max_waiters bounds waiting sets; a waiting set
 * whose client hangs up leaves its queue, and one whose client hangs up as
 * it is granted gives every name back at once; bad input is 400 with nothing
 * held; a set answered 503 (Redis frozen past backend_timeout_ms) whose
 * script ran all the same is given back at once. Starts its own
 * redis-server and lockd processes.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/harness.h"

static struct th_redis rd, rl[3];
static struct th_lockd mem, ra, rb, rlk; /* memory; two lockd on one Redis; Redlock */
static struct th_client *cl;

/* {"names":[prefix0, prefix1, ...]} plus extra fields (",..." or ""). */
static char *names_body(const char *prefix, int n, const char *extra)
{
    static char buf[8192];
    size_t k = (size_t)snprintf(buf, sizeof(buf), "{\"names\":[");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%s\"%s%d\"", i ? "," : "", prefix, i);
    snprintf(buf + k, sizeof(buf) - k, "]%s}", extra);
    return buf;
}

static long one_acquire(const struct th_lockd *l, const char *name, const char *body, char *lease)
{
    struct th_resp r;
    char path[300];
    snprintf(path, sizeof(path), "/locks/%s", name);
    th_http(cl, "POST", th_url(l, path, ""), body, NULL, &r);
    long s = r.status;
    if (s == 200 && lease != NULL)
        snprintf(lease, 40, "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    return s;
}

static long one_release(const struct th_lockd *l, const char *name, const char *lease)
{
    struct th_resp r;
    char path[300], hdr[80];
    snprintf(path, sizeof(path), "/locks/%s", name);
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease);
    const char *hdrs[] = {hdr, NULL};
    th_http(cl, "DELETE", th_url(l, path, ""), NULL, hdrs, &r);
    long s = r.status;
    th_resp_free(&r);
    return s;
}

static bool held(const struct th_lockd *l, const char *name)
{
    struct th_resp r;
    char path[300];
    snprintf(path, sizeof(path), "/locks/%s", name);
    th_http(cl, "GET", th_url(l, path, ""), NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    bool h = json_is_true(json_object_get(r.json, "held"));
    th_resp_free(&r);
    return h;
}

/* How many names starting with prefix are held (GET /locks?prefix=). */
static size_t held_count(const struct th_lockd *l, const char *prefix)
{
    struct th_resp r;
    char path[300];
    snprintf(path, sizeof(path), "/locks?prefix=%s&limit=1000", prefix);
    th_http(cl, "GET", th_url(l, path, ""), NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    size_t n = json_array_size(json_object_get(r.json, "locks"));
    th_resp_free(&r);
    return n;
}

/* ---------------------------------------------------------------- all or none */

struct waiter_arg {
    const struct th_lockd *l;
    const char *body;
    long status;
    int64_t done_ms;
    char lease[40];
    long long tokens[16];
    int ntokens;
};

static void *waiter_run(void *arg)
{
    struct waiter_arg *w = arg;
    struct th_client *c = th_client_new();
    struct th_resp r;
    th_http(c, "POST", th_url(w->l, "/locks", ""), w->body, NULL, &r);
    w->done_ms = th_now_ms();
    w->status = r.status;
    if (r.status == 200) {
        snprintf(w->lease, sizeof(w->lease), "%s", th_jstr(&r, "lease"));
        json_t *locks = json_object_get(r.json, "locks");
        for (size_t i = 0; i < json_array_size(locks) && i < 16; i++)
            w->tokens[w->ntokens++] =
                json_integer_value(json_object_get(json_array_get(locks, i), "fencing_token"));
    }
    th_resp_free(&r);
    th_client_free(c);
    return NULL;
}

/* A holder of one of 10 names: the set is refused (409 naming it), none of
 * the 10 is held by the request; a waiting set is granted whole soon after
 * the holder's release (through l2: another lockd on the same backend). */
static void all_or_none(const struct th_lockd *l, const struct th_lockd *l2, const char *prefix)
{
    char hname[64], hlease[40], p[64];
    snprintf(hname, sizeof(hname), "%s5", prefix);
    CHECK_EQ_INT(one_acquire(l2, hname, "{\"ttl_ms\":30000}", hlease), 200);

    struct th_resp r;
    th_http(cl, "POST", th_url(l, "/locks", ""), names_body(prefix, 10, ""), NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK_STR(th_jerr(&r), "locked");
    CHECK_STR(th_jstr(&r, "name"), hname);
    CHECK(json_object_get(r.json, "holder") != NULL);
    CHECK(th_header(&r, "Retry-After") != NULL);
    th_resp_free(&r);
    for (int i = 0; i < 10; i++) {
        snprintf(p, sizeof(p), "%s%d", prefix, i);
        CHECK(held(l, p) == (i == 5)); /* none of the set's names left held */
    }
    CHECK_EQ_INT(held_count(l, prefix), 1);

    /* A waiting set: nothing held while it waits, all of it after the release. */
    struct waiter_arg w = {.l = l, .body = NULL};
    char body[8192];
    snprintf(body, sizeof(body), "%s", names_body(prefix, 10, ",\"wait_ms\":15000"));
    w.body = body;
    pthread_t th;
    pthread_create(&th, NULL, waiter_run, &w);
    th_sleep_ms(300);
    CHECK_EQ_INT(held_count(l, prefix), 1);
    int64_t released = th_now_ms();
    CHECK_EQ_INT(one_release(l2, hname, hlease), 200);
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.status, 200);
    int64_t took = w.done_ms - released;
    printf("# granted %lld ms after the release\n", (long long)took);
    CHECK(took < 2000 * th_time_scale()); /* woken by the release, not the 30 s ttl */
    CHECK_EQ_INT(w.ntokens, 10);
    CHECK_EQ_INT(held_count(l, prefix), 10);

    /* Released whole: nothing lost. */
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", w.lease);
    const char *hdrs[] = {hdr, NULL};
    th_http(cl, "DELETE", th_url(l, "/locks", ""), names_body(prefix, 10, ""), hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "locks")), 10);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "lost")), 0);
    th_resp_free(&r);
    CHECK_EQ_INT(held_count(l, prefix), 0);
}

static void t_all_or_none_memory(void)
{
    all_or_none(&mem, &mem, "aon-m-");
}

static void t_all_or_none_redis_two_lockd(void)
{
    all_or_none(&ra, &rb, "aon-r-");
}

static void t_all_or_none_redlock(void)
{
    all_or_none(&rlk, &rlk, "aon-l-");
}

/* On one Redis a set is one script call, whatever its size. */
static void t_one_script_call(void)
{
    long long before = th_redis_calls(&rd, "fcall") + th_redis_calls(&rd, "function|load");
    struct th_resp r;
    th_http(cl, "POST", th_url(&ra, "/locks", ""), names_body("one-", 20, ",\"ttl_ms\":5000"), NULL,
            &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    long long after = th_redis_calls(&rd, "fcall") + th_redis_calls(&rd, "function|load");
    CHECK_EQ_INT(after - before, 1);
    CHECK_EQ_INT(held_count(&ra, "one-"), 20);
}

/* A set answered 503 whose script ran all the same gives every name back
 * (multilock.c multi_done, as engine_acquire_in_doubt for one name): a lockd
 * with backend_timeout_ms 500 on a Redis of its own; Redis frozen (SIGSTOP)
 * while a set of three is asked (20 s ttl), so the answer is 503 and the
 * script waits in Redis' socket; Redis resumed, the script runs, and every
 * name must be free again within 1 s, not at the set's ttl. */
static void t_in_doubt_given_back(void)
{
    long long scale = th_time_scale();
    struct th_redis r2;
    struct th_lockd l;
    th_redis_start(&r2, 0, NULL);
    char url[64], tmo[24];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", r2.port);
    snprintf(tmo, sizeof(tmo), "%lld", 500 * scale);
    const char *args[] = {"--redis", url, "--backend_timeout_ms", tmo, NULL};
    th_lockd_start(&l, args, NULL);
    long long calls0 = th_redis_calls(&r2, "fcall");
    kill(r2.pid, SIGSTOP);
    struct th_resp r;
    th_http(cl, "POST", th_url(&l, "/locks", ""), names_body("doubt-", 3, ",\"ttl_ms\":20000"),
            NULL, &r);
    long st = r.status;
    th_resp_free(&r);
    kill(r2.pid, SIGCONT);
    int64_t t1 = th_now_ms();
    while (th_redis_calls(&r2, "fcall") == calls0 && th_now_ms() - t1 < 1000 * scale)
        th_sleep_ms(5);
    bool ran = th_redis_calls(&r2, "fcall") > calls0; /* the set's script */
    const char *names[3] = {"doubt-0", "doubt-1", "doubt-2"};
    int nfree = th_until_free(cl, &l, names, 3, t1, 1000);
    printf("# the set answered %ld; its script %s; %d of 3 names free %lld ms after Redis "
           "resumed\n",
           st, ran ? "ran" : "never ran", nfree, (long long)(th_now_ms() - t1));
    CHECK_EQ_INT(st, 503);
    CHECK(ran);
    CHECK_EQ_INT(nfree, 3);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&r2);
}

/* ---------------------------------------------------------------- stress */

#define ST_CLIENTS 32
#define ST_NAMES 16

static atomic_int reg[ST_NAMES]; /* who holds each name: a client id + 1, or 0 */
static atomic_int st_grants, st_overlaps, st_timeouts, st_errors, st_lost;

struct st_arg {
    const struct th_lockd *l;
    const char *prefix;
    int id;
    int64_t until_ms;
    unsigned seed;
};

static void *st_run(void *arg)
{
    struct st_arg *a = arg;
    struct th_client *c = th_client_new();
    while (th_now_ms() < a->until_ms) {
        int k = 1 + (int)(rand_r(&a->seed) % 5), idx[5];
        bool used[ST_NAMES] = {false};
        char body[1024];
        size_t n = (size_t)snprintf(body, sizeof(body), "{\"names\":[");
        for (int i = 0; i < k; i++) {
            int j;
            do {
                j = (int)(rand_r(&a->seed) % ST_NAMES);
            } while (used[j]);
            used[j] = true;
            idx[i] = j;
            n += (size_t)snprintf(body + n, sizeof(body) - n, "%s\"%s%d\"", i ? "," : "", a->prefix,
                                  j);
        }
        char names[1024];
        snprintf(names, sizeof(names), "%.*s]}", (int)n, body);
        snprintf(body + n, sizeof(body) - n, "],\"wait_ms\":%lld,\"ttl_ms\":10000}",
                 8000 * th_time_scale());
        struct th_resp r;
        th_http(c, "POST", th_url(a->l, "/locks", ""), body, NULL, &r);
        if (r.status == 409) {
            if (atomic_fetch_add(&st_timeouts, 1) < 3)
                printf("# timed out: %s\n", r.body);
            th_resp_free(&r);
            continue;
        }
        if (r.status != 200) {
            printf("# %ld %s\n", r.status, r.body ? r.body : "");
            atomic_fetch_add(&st_errors, 1);
            th_resp_free(&r);
            continue;
        }
        char hdr[80];
        snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
        th_resp_free(&r);
        atomic_fetch_add(&st_grants, 1);
        for (int i = 0; i < k; i++) {
            int zero = 0;
            if (!atomic_compare_exchange_strong(&reg[idx[i]], &zero, a->id + 1))
                atomic_fetch_add(&st_overlaps, 1); /* two holders of one name */
        }
        th_sleep_ms(rand_r(&a->seed) % 3);
        for (int i = 0; i < k; i++) {
            int me = a->id + 1;
            if (!atomic_compare_exchange_strong(&reg[idx[i]], &me, 0))
                atomic_fetch_add(&st_overlaps, 1);
        }
        const char *hdrs[] = {hdr, NULL};
        th_http(c, "DELETE", th_url(a->l, "/locks", ""), names, hdrs, &r);
        if (r.status != 200 || json_array_size(json_object_get(r.json, "lost")) != 0)
            atomic_fetch_add(&st_lost, 1);
        th_resp_free(&r);
    }
    th_client_free(c);
    return NULL;
}

static void stress(const struct th_lockd *l1, const struct th_lockd *l2, const char *prefix,
                   int64_t secs)
{
    atomic_store(&st_grants, 0);
    atomic_store(&st_overlaps, 0);
    atomic_store(&st_timeouts, 0);
    atomic_store(&st_errors, 0);
    atomic_store(&st_lost, 0);
    for (int i = 0; i < ST_NAMES; i++)
        atomic_store(&reg[i], 0);
    pthread_t th[ST_CLIENTS];
    struct st_arg args[ST_CLIENTS];
    int64_t start = th_now_ms();
    for (int i = 0; i < ST_CLIENTS; i++) {
        args[i] = (struct st_arg){.l = i % 2 ? l2 : l1,
                                  .prefix = prefix,
                                  .id = i,
                                  .until_ms = start + secs * 1000,
                                  .seed = (unsigned)(start + i * 7919)};
        pthread_create(&th[i], NULL, st_run, &args[i]);
    }
    for (int i = 0; i < ST_CLIENTS; i++)
        pthread_join(th[i], NULL);
    int64_t took = th_now_ms() - start;
    printf("# %d sets granted in %lld ms, %d timed out, %d overlaps, %d errors, %d lost\n",
           atomic_load(&st_grants), (long long)took, atomic_load(&st_timeouts),
           atomic_load(&st_overlaps), atomic_load(&st_errors), atomic_load(&st_lost));
    CHECK_EQ_INT(atomic_load(&st_overlaps), 0);
    CHECK_EQ_INT(atomic_load(&st_errors), 0);
    CHECK_EQ_INT(atomic_load(&st_lost), 0);
    /* No deadlock: every client finished its last wait (8 s at most) and
     * sets kept being granted; a wait that ran out is rare. */
    CHECK(took < secs * 1000 + 13000 * th_time_scale());
    CHECK(atomic_load(&st_grants) >= 100 / th_time_scale());
    CHECK(atomic_load(&st_timeouts) * 20 <= atomic_load(&st_grants));
    CHECK_EQ_INT(held_count(l1, prefix), 0);
}

static void t_stress_memory(void)
{
    stress(&mem, &mem, "st-m-", 5);
}

static void t_stress_redis_two_lockd(void)
{
    stress(&ra, &rb, "st-r-", 5);
}

static void t_stress_redlock(void)
{
    stress(&rlk, &rlk, "st-l-", 3);
}

/* ---------------------------------------------------------------- renew, release, members */

static long set_call(const struct th_lockd *l, const char *method, const char *body,
                     const char *lease, struct th_resp *r)
{
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease);
    const char *hdrs[] = {hdr, NULL};
    th_http(cl, method, th_url(l, "/locks", ""), body, hdrs, r);
    return r->status;
}

static bool list_is(const struct th_resp *r, const char *key, const char *want)
{
    json_t *a = json_object_get(r->json, key);
    char got[256] = "";
    size_t k = 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        k += (size_t)snprintf(got + k, sizeof(got) - k, "%s%s", i ? "," : "",
                              json_string_value(json_array_get(a, i)));
    if (strcmp(got, want) != 0)
        printf("# %s: '%s', want '%s'\n", key, got, want);
    return strcmp(got, want) == 0;
}

static void renew_release(const struct th_lockd *l)
{
    struct th_resp r;
    const char *set = "{\"names\":[\"rr-a\",\"rr-b\",\"rr-c\"]}";
    th_http(cl, "POST", th_url(l, "/locks", ""),
            "{\"names\":[\"rr-a\",\"rr-b\",\"rr-c\"],\"ttl_ms\":5000}", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    char lease[40];
    snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
    CHECK_STR(th_header(&r, "Lock-Lease"), lease);
    json_t *locks = json_object_get(r.json, "locks");
    CHECK_EQ_INT(json_array_size(locks), 3);
    CHECK_STR(json_string_value(json_object_get(json_array_get(locks, 1), "name")), "rr-b");
    th_resp_free(&r);

    /* a member alone, with the set's lease: renewed, then released */
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease);
    const char *hdrs[] = {hdr, NULL};
    th_http(cl, "PUT", th_url(l, "/locks/rr-a", ""), "{\"ttl_ms\":6000}", hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    CHECK_EQ_INT(one_release(l, "rr-b", lease), 200);
    char other[40];
    CHECK_EQ_INT(one_acquire(l, "rr-b", "{\"ttl_ms\":5000}", other), 200);

    /* the set: rr-b is lost (another lease holds it) */
    char body[256];
    snprintf(body, sizeof(body), "{\"names\":[\"rr-a\",\"rr-b\",\"rr-c\"],\"ttl_ms\":7000}");
    CHECK_EQ_INT(set_call(l, "PUT", body, lease, &r), 200);
    CHECK(list_is(&r, "locks", "rr-a,rr-c"));
    CHECK(list_is(&r, "lost", "rr-b"));
    CHECK_EQ_INT(th_jint(&r, "ttl_ms"), 7000);
    th_resp_free(&r);
    CHECK_EQ_INT(set_call(l, "DELETE", set, lease, &r), 200);
    CHECK(list_is(&r, "locks", "rr-a,rr-c"));
    CHECK(list_is(&r, "lost", "rr-b"));
    th_resp_free(&r);
    CHECK(!held(l, "rr-a") && held(l, "rr-b") && !held(l, "rr-c"));
    /* nothing of it held by the lease: 409 while another holds a member, 404 after */
    CHECK_EQ_INT(set_call(l, "PUT", set, lease, &r), 409);
    CHECK_STR(th_jerr(&r), "held_by_other");
    th_resp_free(&r);
    CHECK_EQ_INT(one_release(l, "rr-b", other), 200);
    CHECK_EQ_INT(set_call(l, "DELETE", set, lease, &r), 404);
    CHECK_STR(th_jerr(&r), "not_held");
    th_resp_free(&r);
    /* the lease may come in the body too; a different one in the header conflicts */
    snprintf(body, sizeof(body), "{\"names\":[\"rr-a\"],\"lease\":\"%s\"}", lease);
    CHECK_EQ_INT(set_call(l, "DELETE", body, "0123456789abcdef0123456789abcdef", &r), 400);
    CHECK_STR(th_jerr(&r), "conflicting_lease");
    th_resp_free(&r);
}

static void t_renew_release_memory(void)
{
    renew_release(&mem);
}

static void t_renew_release_redis(void)
{
    renew_release(&ra);
}

/* Members of a set taken under a session outlive their ttl (the watchdog
 * renews each) and are listed by the session; ending it releases them. */
static void session_set(const struct th_lockd *l)
{
    struct th_resp r;
    th_http(cl, "POST", th_url(l, "/sessions", ""), "{\"ttl_ms\":3000}", NULL, &r);
    CHECK_EQ_INT(r.status, 201);
    char sid[80], body[256], path[128];
    snprintf(sid, sizeof(sid), "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
    snprintf(body, sizeof(body),
             "{\"names\":[\"ss-a\",\"ss-b\",\"ss-c\"],\"ttl_ms\":300,\"session\":\"%s\"}", sid);
    th_http(cl, "POST", th_url(l, "/locks", ""), body, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(th_jstr(&r, "session"), sid);
    th_resp_free(&r);
    snprintf(path, sizeof(path), "/sessions/%s", sid);
    for (int i = 0; i < 4; i++) { /* 1.2 s: four times the members' ttl */
        th_sleep_ms(300);
        th_http(cl, "PUT", th_url(l, path, ""), NULL, NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        th_resp_free(&r);
    }
    CHECK(held(l, "ss-a") && held(l, "ss-b") && held(l, "ss-c"));
    th_http(cl, "GET", th_url(l, path, ""), NULL, NULL, &r);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "locks")), 3);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "lost")), 0);
    th_resp_free(&r);
    th_http(cl, "DELETE", th_url(l, path, ""), NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "released")), 3);
    th_resp_free(&r);
    CHECK_EQ_INT(held_count(l, "ss-"), 0);
}

static void t_session_memory(void)
{
    session_set(&mem);
}

static void t_session_redis(void)
{
    session_set(&ra);
}

/* ---------------------------------------------------------------- promotion */

static int64_t waiters_of(const struct th_lockd *l, const char *name)
{
    struct th_resp r;
    char path[300];
    snprintf(path, sizeof(path), "/locks/%s", name);
    th_http(cl, "GET", th_url(l, path, ""), NULL, NULL, &r);
    int64_t n = th_jint(&r, "waiters");
    th_resp_free(&r);
    return n;
}

/* Two waiting sets queued behind one name X: when X is released the first
 * one finds its other name held and moves on to wait for that; the second,
 * promoted to the head of X's queue, is granted at once (not at some later
 * release or its deadline). */
static void promoted(const struct th_lockd *l, const char *prefix)
{
    char x[64], y[64], z[64], lx[40], ly[40], b1[256], b2[256];
    snprintf(x, sizeof(x), "%sx", prefix);
    snprintf(y, sizeof(y), "%sy", prefix);
    snprintf(z, sizeof(z), "%sz", prefix);
    CHECK_EQ_INT(one_acquire(l, x, "{\"ttl_ms\":30000}", lx), 200);
    CHECK_EQ_INT(one_acquire(l, y, "{\"ttl_ms\":30000}", ly), 200);
    snprintf(b1, sizeof(b1), "{\"names\":[\"%s\",\"%s\"],\"wait_ms\":15000}", x, y);
    snprintf(b2, sizeof(b2), "{\"names\":[\"%s\",\"%s\"],\"wait_ms\":15000}", x, z);
    struct waiter_arg w1 = {.l = l, .body = b1}, w2 = {.l = l, .body = b2};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, waiter_run, &w1);
    int64_t end = th_now_ms() + 3000 * th_time_scale();
    while (waiters_of(l, x) != 1 && th_now_ms() < end)
        th_sleep_ms(10);
    pthread_create(&t2, NULL, waiter_run, &w2);
    while (waiters_of(l, x) != 2 && th_now_ms() < end)
        th_sleep_ms(10);
    CHECK_EQ_INT(waiters_of(l, x), 2);
    CHECK_EQ_INT(one_release(l, x, lx), 200);
    int64_t released = th_now_ms();
    pthread_join(t2, NULL);
    CHECK_EQ_INT(w2.status, 200);
    printf("# the second set granted %lld ms after the release\n",
           (long long)(w2.done_ms - released));
    CHECK(w2.done_ms - released < 1000 * th_time_scale());
    /* the first waits on (x now held by the second, or y), once its own
     * attempt after x's release is answered (slow under valgrind) */
    end = th_now_ms() + 3000 * th_time_scale();
    while (waiters_of(l, x) + waiters_of(l, y) != 1 && th_now_ms() < end)
        th_sleep_ms(10);
    CHECK_EQ_INT(waiters_of(l, x) + waiters_of(l, y), 1);
    struct th_resp r;
    char names[256];
    snprintf(names, sizeof(names), "{\"names\":[\"%s\",\"%s\"]}", x, z);
    CHECK_EQ_INT(set_call(l, "DELETE", names, w2.lease, &r), 200);
    th_resp_free(&r);
    CHECK_EQ_INT(one_release(l, y, ly), 200);
    pthread_join(t1, NULL);
    CHECK_EQ_INT(w1.status, 200);
    snprintf(names, sizeof(names), "{\"names\":[\"%s\",\"%s\"]}", x, y);
    CHECK_EQ_INT(set_call(l, "DELETE", names, w1.lease, &r), 200);
    th_resp_free(&r);
}

static void t_promoted_memory(void)
{
    promoted(&mem, "pr-m-");
}

static void t_promoted_redis(void)
{
    promoted(&ra, "pr-r-");
}

static void t_promoted_redlock(void)
{
    promoted(&rlk, "pr-l-");
}

/* max_waiters bounds waiting sets too: with the one slot taken by a waiter,
 * a waiting set is answered 409 at once, holding nothing. */
static void t_max_waiters(void)
{
    struct th_lockd small;
    const char *args[] = {"--backend", "memory", "--max_waiters", "1", NULL};
    th_lockd_start(&small, args, NULL);
    char lease[40];
    CHECK_EQ_INT(one_acquire(&small, "mw-x", "{\"ttl_ms\":30000}", lease), 200);
    struct waiter_arg w = {.l = &small, .body = "{\"names\":[\"mw-x\"],\"wait_ms\":10000}"};
    pthread_t th;
    pthread_create(&th, NULL, waiter_run, &w);
    int64_t end = th_now_ms() + 3000 * th_time_scale();
    while (waiters_of(&small, "mw-x") != 1 && th_now_ms() < end)
        th_sleep_ms(10);
    CHECK_EQ_INT(waiters_of(&small, "mw-x"), 1);
    struct th_resp r;
    int64_t t0 = th_now_ms();
    th_http(cl, "POST", th_url(&small, "/locks", ""),
            "{\"names\":[\"mw-y\",\"mw-x\"],\"wait_ms\":10000}", NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK_STR(th_jstr(&r, "name"), "mw-x");
    th_resp_free(&r);
    CHECK(th_now_ms() - t0 < 2000 * th_time_scale()); /* at once, not after wait_ms */
    CHECK(!held(&small, "mw-y"));
    CHECK_EQ_INT(one_release(&small, "mw-x", lease), 200);
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.status, 200);
    th_lockd_kill(&small, SIGKILL);
}

/* ---------------------------------------------------------------- hang-up */

/* A waiting set whose client hangs up leaves the queue it waits in, and is
 * not granted when the name it waited for is released; a single waiter
 * queued behind it gets that name. */
static void hang_up(const struct th_lockd *l, const char *prefix)
{
    char a[64], b[64], lease[40];
    snprintf(a, sizeof(a), "%sa", prefix);
    snprintf(b, sizeof(b), "%sb", prefix);
    CHECK_EQ_INT(one_acquire(l, b, "{\"ttl_ms\":30000}", lease), 200);
    int fd = th_connect(l->port);
    char body[256], rq[512];
    snprintf(body, sizeof(body), "{\"names\":[\"%s\",\"%s\"],\"wait_ms\":10000}", a, b);
    snprintf(rq, sizeof(rq), "POST /locks HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    CHECK(write(fd, rq, strlen(rq)) == (ssize_t)strlen(rq));
    int64_t end = th_now_ms() + 3000 * th_time_scale();
    while (waiters_of(l, b) != 1 && th_now_ms() < end)
        th_sleep_ms(10);
    CHECK_EQ_INT(waiters_of(l, b), 1); /* queued behind the holder of b */
    CHECK(!held(l, a));                /* holding nothing while it waits */
    struct waiter_arg w = {.l = l, .body = NULL};
    char path[128];
    snprintf(path, sizeof(path), "{\"names\":[\"%s\"],\"wait_ms\":10000}", b);
    w.body = path;
    pthread_t th;
    pthread_create(&th, NULL, waiter_run, &w);
    end = th_now_ms() + 3000 * th_time_scale();
    while (waiters_of(l, b) != 2 && th_now_ms() < end)
        th_sleep_ms(10);
    CHECK_EQ_INT(waiters_of(l, b), 2);
    close(fd);
    end = th_now_ms() + 3000 * th_time_scale();
    while (waiters_of(l, b) != 1 && th_now_ms() < end)
        th_sleep_ms(10);
    CHECK_EQ_INT(waiters_of(l, b), 1); /* the hung-up set left */
    CHECK_EQ_INT(one_release(l, b, lease), 200);
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.status, 200); /* the next waiter got b, not the dead set */
    CHECK(!held(l, a));
    CHECK_EQ_INT(one_release(l, b, w.lease), 200);
}

static void t_hang_up_memory(void)
{
    hang_up(&mem, "hu-m-");
}

static void t_hang_up_redis(void)
{
    hang_up(&ra, "hu-r-");
}

/* A waiting set whose client hangs up as the name it waits for frees may
 * be granted in that same instant: lockd gives every name back at once
 * (the grant's hang-up peek, or grant_pending when the answer could not be
 * delivered), not at the set's 30 s ttl. The hang-up (a close, or a reset
 * every other round) and the holder's release are written back to back on
 * raw sockets, so lockd often sees both in one loop pass; every third
 * round lets the hang-up arrive first. */
static void hang_up_race(const struct th_lockd *l, const char *prefix)
{
    for (int i = 0; i < 30; i++) {
        char n[2][64], lease[40];
        snprintf(n[0], sizeof(n[0]), "%s%d-a", prefix, i);
        snprintf(n[1], sizeof(n[1]), "%s%d-b", prefix, i);
        CHECK_EQ_INT(one_acquire(l, n[1], "{\"ttl_ms\":30000}", lease), 200);
        int fd = th_connect(l->port), rel = th_connect(l->port);
        char body[256], rq[512], rq2[256];
        snprintf(body, sizeof(body),
                 "{\"names\":[\"%s\",\"%s\"],\"wait_ms\":10000,\"ttl_ms\":30000}", n[0], n[1]);
        int k = snprintf(rq, sizeof(rq),
                         "POST /locks HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                         strlen(body), body);
        CHECK(write(fd, rq, (size_t)k) == k);
        int k2 = snprintf(rq2, sizeof(rq2),
                          "DELETE /locks/%s HTTP/1.1\r\nHost: x\r\nLock-Lease: %s\r\n"
                          "Connection: close\r\n\r\n",
                          n[1], lease);
        int64_t end = th_now_ms() + 3000 * th_time_scale();
        while (waiters_of(l, n[1]) != 1 && th_now_ms() < end)
            th_sleep_ms(5);
        CHECK_EQ_INT(waiters_of(l, n[1]), 1);
        if (i % 2 == 1) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
        }
        close(fd);
        if (i % 3 == 2)
            th_sleep_ms(1);
        CHECK(write(rel, rq2, (size_t)k2) == k2);
        char ans[1024];
        size_t have = 0;
        ssize_t got;
        while (have < sizeof(ans) - 1 && (got = read(rel, ans + have, sizeof(ans) - 1 - have)) > 0)
            have += (size_t)got;
        ans[have] = '\0';
        close(rel);
        CHECK(strncmp(ans, "HTTP/1.1 200", 12) == 0);
        end = th_now_ms() + 2000 * th_time_scale();
        while ((held(l, n[0]) || held(l, n[1])) && th_now_ms() < end)
            th_sleep_ms(10);
        if (held(l, n[0]) || held(l, n[1]))
            th_fail(__FILE__, __LINE__,
                    "round %d: '%s' or '%s' still held after the waiting set's client hung up", i,
                    n[0], n[1]);
    }
}

static void t_hang_up_race_memory(void)
{
    hang_up_race(&mem, "hr-m-");
}

static void t_hang_up_race_redis(void)
{
    hang_up_race(&ra, "hr-r-");
}

/* ---------------------------------------------------------------- bad input */

static void bad(const struct th_lockd *l, const char *method, const char *body, const char *err)
{
    struct th_resp r;
    const char *hdrs[] = {"Lock-Lease: 0123456789abcdef0123456789abcdef", NULL};
    th_http(cl, method, th_url(l, "/locks", ""), body, strcmp(method, "POST") ? hdrs : NULL, &r);
    if (r.status != 400 || th_jerr(&r) == NULL || strcmp(th_jerr(&r), err) != 0)
        printf("# %s %s -> %ld %s\n", method, body, r.status, r.body);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(th_jerr(&r), err);
    CHECK(th_jstr(&r, "message") != NULL);
    th_resp_free(&r);
}

static void t_bad_input(void)
{
    const struct th_lockd *ls[] = {&mem, &ra};
    for (int i = 0; i < 2; i++) {
        const struct th_lockd *l = ls[i];
        bad(l, "POST", "{\"names\":[]}", "invalid_field");
        bad(l, "POST", "", "invalid_field");
        bad(l, "POST", "{\"names\":\"bad-a\"}", "invalid_field");
        bad(l, "POST", names_body("bad-", 65, ""), "invalid_field");
        bad(l, "POST", "{\"names\":[\"bad-a\",\"bad-b\",\"bad-a\"]}", "invalid_field");
        bad(l, "POST", "{\"names\":[\"bad-a\",\"bad/b\"]}", "invalid_name");
        bad(l, "POST", "{\"names\":[\"bad-a\",\"\"]}", "invalid_name");
        bad(l, "POST", "{\"names\":[\"bad-a\",7]}", "invalid_name");
        bad(l, "POST", "{\"names\":[\"bad-a\"],\"mode\":\"shared\"}", "unknown_field");
        bad(l, "POST", "{\"names\":[\"bad-a\"],\"ttl_ms\":5}", "invalid_field");
        bad(l, "PUT", "{\"names\":[]}", "invalid_field");
        bad(l, "DELETE", "{\"names\":[\"bad-a\",\"bad-a\"]}", "invalid_field");
        bad(l, "DELETE", "{\"names\":[\"bad-a\"],\"ttl_ms\":1000}", "unknown_field");
        CHECK_EQ_INT(held_count(l, "bad"), 0);
    }
    /* 64 names is the most, and fine */
    struct th_resp r;
    th_http(cl, "POST", th_url(&mem, "/locks", ""), names_body("max-", 64, ",\"ttl_ms\":2000"),
            NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    CHECK_EQ_INT(held_count(&mem, "max-"), 64);
}

int main(void)
{
    char redis_url[64], redlock_urls[256];
    th_redis_start(&rd, 0, NULL);
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", rd.port);
    for (int i = 0; i < 3; i++)
        th_redis_start(&rl[i], 0, NULL);
    snprintf(redlock_urls, sizeof(redlock_urls),
             "redis://127.0.0.1:%d,redis://127.0.0.1:%d,redis://127.0.0.1:%d", rl[0].port,
             rl[1].port, rl[2].port);
    const char *margs[] = {"--backend", "memory", NULL};
    const char *rargs[] = {"--backend", "redis", "--redis", redis_url, NULL};
    const char *largs[] = {"--backend", "redlock", "--redis", redlock_urls, NULL};
    th_lockd_start(&mem, margs, NULL);
    th_lockd_start(&ra, rargs, NULL);
    th_lockd_start(&rb, rargs, NULL);
    th_lockd_start(&rlk, largs, NULL);
    cl = th_client_new();

    TH_RUN(t_all_or_none_memory);
    TH_RUN(t_all_or_none_redis_two_lockd);
    TH_RUN(t_all_or_none_redlock);
    TH_RUN(t_one_script_call);
    TH_RUN(t_in_doubt_given_back);
    TH_RUN(t_renew_release_memory);
    TH_RUN(t_renew_release_redis);
    TH_RUN(t_session_memory);
    TH_RUN(t_session_redis);
    TH_RUN(t_bad_input);
    TH_RUN(t_promoted_memory);
    TH_RUN(t_promoted_redis);
    TH_RUN(t_promoted_redlock);
    TH_RUN(t_max_waiters);
    TH_RUN(t_hang_up_memory);
    TH_RUN(t_hang_up_redis);
    TH_RUN(t_hang_up_race_memory);
    TH_RUN(t_hang_up_race_redis);
    TH_RUN(t_stress_memory);
    TH_RUN(t_stress_redis_two_lockd);
    TH_RUN(t_stress_redlock);

    th_client_free(cl);
    th_lockd_kill(&mem, SIGKILL);
    th_lockd_kill(&ra, SIGKILL);
    th_lockd_kill(&rb, SIGKILL);
    th_lockd_kill(&rlk, SIGKILL);
    th_redis_stop(&rd);
    for (int i = 0; i < 3; i++)
        th_redis_stop(&rl[i]);
    return th_done();
}
