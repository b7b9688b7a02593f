/*
 * cluster.c - issue 24's cluster backend end to end: two real lockd
 * processes on `backend cluster` over a real Redis Cluster of three
 * primaries (redis-cli --cluster create, cluster-require-full-coverage no)
 * on loopback. Locks spread over every primary; mutual exclusion and
 * increasing tokens with 2 lockd x 16 clients; a waiter on one lockd woken
 * by a release through the other within 100 ms (sharded pub/sub, on every
 * primary); a slot resharded by hand (IMPORTING/MIGRATING, MIGRATE, SETSLOT
 * NODE) while one of its names is held and others are under load: no lock
 * lost, no second holder, tokens increasing, then MOVED followed, and the
 * redirections counted in lockd_cluster_redirections_total; a slot moved
 * (SETSLOT NODE everywhere) while lockd's map names the old primary: the
 * request follows the MOVED and lockd_cluster_redirections_total{kind=
 * "moved"} counts it; a slot nobody serves (DELSLOTS): CLUSTERDOWN retried
 * with pauses, 503 within about 1 s, other slots served; a free name's slot
 * MIGRATING while only its fence counter is on the source: the acquire
 * script's TRYAGAIN retried the same way, then granted on the destination
 * with a larger token; sessions over HTTP
 * (watchdog past several lease ttls, expiry then lock-delay); one
 * primary killed: its names 503, the others served, /readyz 503.
 * Multi-locks: one slot's names in one script call, names of every primary
 * taken one by one, all or none, a waiting set woken across lockd, and a
 * step answered 503 (its primary frozen) whose script ran all the same
 * given back with the rest of the set.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/redis_slot.h"
#include "tests/lib/harness.h"

#define N 3
#define PREFIX "t:"

static struct th_redis node[N];
static struct th_lockd L[2];

static int slot_of(const char *name)
{
    char key[128];
    int n = snprintf(key, sizeof(key), PREFIX "{%s}", name);
    return redis_key_slot(key, (size_t)n);
}

/* The node (index) that owns slot, as CLUSTER NODES on node 0 says. */
static int owner_node(int slot)
{
    const char *out = th_redis_cli(&node[0], "CLUSTER NODES");
    for (const char *line = out; line && *line;) {
        const char *nl = strchr(line, '\n');
        char buf[1024];
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        snprintf(buf, sizeof(buf), "%.*s", (int)(len < 1023 ? len : 1023), line);
        line = nl ? nl + 1 : NULL;
        if (strstr(buf, "master") == NULL)
            continue;
        int port = 0;
        char *colon = strchr(buf, ':');
        if (colon != NULL)
            port = atoi(colon + 1);
        /* slot ranges are the fields after the 8th */
        char *save = NULL;
        int f = 0;
        for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save), f++) {
            if (f < 8 || tok[0] == '[')
                continue;
            int lo = atoi(tok), hi = lo;
            char *dash = strchr(tok, '-');
            if (dash != NULL)
                hi = atoi(dash + 1);
            if (slot >= lo && slot <= hi)
                for (int i = 0; i < N; i++)
                    if (node[i].port == port)
                        return i;
        }
    }
    return -1;
}

static void node_id(int i, char *out, size_t cap)
{
    const char *id = th_redis_cli(&node[i], "CLUSTER MYID");
    snprintf(out, cap, "%.40s", id);
}

static void lockd_on(struct th_lockd *l)
{
    const char *extra[] = {"--backend_timeout_ms", "1000", NULL};
    th_cluster_lockd_start(l, &node[0], &node[2], PREFIX, extra);
}

static long req(struct th_client *c, const struct th_lockd *l, const char *method, const char *name,
                const char *body, const char *lease, struct th_resp *keep)
{
    char url[160];
    snprintf(url, sizeof(url), "%s/locks/%s", l->url, name);
    return th_req(c, method, url, body, lease, keep);
}

/* ---- locks spread over every primary ---- */

static void t_spread(void)
{
    struct th_client *c = th_client_new();
    int per[N] = {0};
    for (int i = 0; i < 60; i++) {
        char name[32];
        snprintf(name, sizeof(name), "spread-%d", i);
        CHECK_EQ_INT(req(c, &L[i % 2], "POST", name, "{\"ttl_ms\":20000}", NULL, NULL), 200);
        int o = owner_node(slot_of(name));
        CHECK(o >= 0);
        per[o]++;
    }
    for (int i = 0; i < N; i++) {
        /* the keys are where the slot map says: on that primary */
        long long keys = atoll(th_redis_cli(&node[i], "EVAL \"return #redis.call('KEYS', "
                                                      "'t:{spread-*}')\" 0"));
        printf("# primary %d: %d names, %lld lock keys\n", i, per[i], keys);
        CHECK(per[i] > 0);
        CHECK_EQ_INT(keys, per[i]);
    }
    /* one listing walks all three */
    char url[160];
    snprintf(url, sizeof(url), "%s/locks?prefix=spread-&limit=7", L[0].url);
    int listed = 0;
    char cursor[512] = "";
    for (int page = 0; page < 100; page++) {
        char u[700];
        snprintf(u, sizeof(u), "%s%s%s", url, cursor[0] ? "&cursor=" : "", cursor);
        struct th_resp r;
        th_http(c, "GET", u, NULL, NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        listed += (int)json_array_size(json_object_get(r.json, "locks"));
        const char *next = th_jstr(&r, "next_cursor");
        snprintf(cursor, sizeof(cursor), "%s", next ? next : "");
        th_resp_free(&r);
        if (cursor[0] == '\0')
            break;
    }
    CHECK_EQ_INT(listed, 60);
    th_client_free(c);
}

/* ---- 2 lockd x 16 clients: no two holders, tokens increasing ---- */

#define CLIENTS 16
#define NAMES 6

static char load_names[NAMES][32];
static struct th_excl ex = {.mu = PTHREAD_MUTEX_INITIALIZER};
static atomic_int odd, unavailable;
static atomic_bool stop_load;

static void *loader(void *arg)
{
    long id = (long)arg;
    struct th_client *c = th_client_new();
    const struct th_lockd *l = &L[id % 2];
    for (int i = 0; !atomic_load(&stop_load) && i < 100000; i++) {
        int k = (int)((id + i) % NAMES);
        struct th_resp r;
        long st = req(c, l, "POST", load_names[k], "{\"ttl_ms\":5000,\"wait_ms\":300}", NULL, &r);
        if (st != 200) {
            if (st == 503)
                atomic_fetch_add(&unavailable, 1);
            else if (st != 409) {
                fprintf(stderr, "client %ld: acquire %ld %s\n", id, st, r.body);
                atomic_fetch_add(&odd, 1);
            }
            th_resp_free(&r);
            continue;
        }
        long long token = th_jint(&r, "fencing_token");
        char lease[64];
        snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
        th_resp_free(&r);
        th_excl_enter(&ex, k, load_names[k], token);
        th_sleep_ms(1);
        th_excl_leave(&ex, k);
        st = req(c, l, "DELETE", load_names[k], NULL, lease, NULL);
        if (st != 200) {
            fprintf(stderr, "client %ld: release %ld\n", id, st);
            atomic_fetch_add(&odd, 1);
        }
    }
    th_client_free(c);
    return NULL;
}

static pthread_t load_th[CLIENTS];

static void load_start(void)
{
    th_excl_reset(&ex);
    atomic_store(&stop_load, false);
    for (long i = 0; i < CLIENTS; i++)
        CHECK(pthread_create(&load_th[i], NULL, loader, (void *)i) == 0);
}

static void load_stop(void)
{
    atomic_store(&stop_load, true);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(load_th[i], NULL);
    printf("# %d grants, %d overlaps, %d regressions, %d answered 503\n", atomic_load(&ex.grants),
           atomic_load(&ex.overlaps), atomic_load(&ex.regressions), atomic_load(&unavailable));
    CHECK(atomic_load(&ex.grants) > 0);
    CHECK_EQ_INT(atomic_load(&ex.overlaps), 0);
    CHECK_EQ_INT(atomic_load(&ex.regressions), 0);
    CHECK_EQ_INT(atomic_load(&odd), 0);
}

static void t_two_lockd_16_clients(void)
{
    /* two names per primary */
    int per[N] = {0}, k = 0;
    for (int i = 0; k < NAMES && i < 1000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "load-%d", i);
        int o = owner_node(slot_of(name));
        if (o < 0 || per[o] == NAMES / N)
            continue;
        per[o]++;
        snprintf(load_names[k++], sizeof(load_names[0]), "%s", name);
    }
    CHECK_EQ_INT(k, NAMES);
    load_start();
    th_sleep_ms(2000);
    load_stop();
    CHECK_EQ_INT(atomic_load(&unavailable), 0);
}

/* ---- a waiter on one lockd, woken by a release through the other ---- */

struct waiter {
    const char *name;
    long status;
    int64_t done_ms;
};

static void *wait_one(void *arg)
{
    struct waiter *w = arg;
    struct th_client *c = th_client_new();
    w->status = req(c, &L[1], "POST", w->name, "{\"ttl_ms\":5000,\"wait_ms\":10000}", NULL, NULL);
    w->done_ms = th_now_ms();
    th_client_free(c);
    return NULL;
}

static void t_waiter_woken_across_lockd(void)
{
    struct th_client *c = th_client_new();
    int seen[N] = {0};
    int done = 0;
    for (int i = 0; done < N && i < 200; i++) {
        char name[32];
        snprintf(name, sizeof(name), "wake-%d", i);
        int o = owner_node(slot_of(name));
        if (o < 0 || seen[o])
            continue;
        seen[o] = 1;
        done++;
        struct th_resp r;
        /* a long lease: only the release can let the waiter in */
        CHECK_EQ_INT(req(c, &L[0], "POST", name, "{\"ttl_ms\":30000}", NULL, &r), 200);
        char lease[64];
        snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
        th_resp_free(&r);
        struct waiter w = {.name = name};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, wait_one, &w) == 0);
        th_sleep_ms(300); /* parked and subscribed on the slot's primary */
        CHECK_EQ_INT(req(c, &L[0], "DELETE", name, NULL, lease, NULL), 200);
        int64_t released = th_now_ms();
        pthread_join(th, NULL);
        printf("# primary %d: waiter on the other lockd granted %lld ms after the release\n", o,
               (long long)(w.done_ms - released));
        CHECK_EQ_INT(w.status, 200);
        CHECK(w.done_ms - released <= 100 * th_time_scale());
    }
    CHECK_EQ_INT(done, N);
    /* the wake-ups went out on their shards (SPUBLISH from the scripts),
     * never broadcast over the cluster bus (PUBLISH) */
    for (int i = 0; i < N; i++) {
        CHECK(th_redis_calls(&node[i], "spublish") > 0);
        CHECK_EQ_INT(th_redis_calls(&node[i], "publish"), 0);
    }
    th_client_free(c);
}

/* A renewal through one lockd that shortens the lease (30 s left, renewed
 * for 300 ms) gets a waiter on the other lockd its grant at the new expiry:
 * the renewal's 'r300' goes out on the slot's shard (SPUBLISH) and the
 * subscriber there re-arms the waiter. Fails when a renewal publishes
 * nothing (the waiter waits for the 30 s lease: 409 after its 10 s). */
static void t_waiter_shorter_across_lockd(void)
{
    struct th_client *c = th_client_new();
    struct th_resp r;
    CHECK_EQ_INT(req(c, &L[0], "POST", "shorter", "{\"ttl_ms\":30000}", NULL, &r), 200);
    char lease[64];
    snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    struct waiter w = {.name = "shorter"};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, wait_one, &w) == 0);
    th_sleep_ms(300); /* parked and subscribed on the slot's primary */
    int64_t t0 = th_now_ms();
    CHECK_EQ_INT(req(c, &L[0], "PUT", "shorter", "{\"ttl_ms\":300}", lease, NULL), 200);
    pthread_join(th, NULL);
    printf("# renewed for 300 ms: waiter on the other lockd granted after %lld ms\n",
           (long long)(w.done_ms - t0));
    CHECK_EQ_INT(w.status, 200);
    CHECK(w.done_ms - t0 >= 290);
    CHECK(w.done_ms - t0 <= 300 + 100 * th_time_scale());
    th_client_free(c);
}

/* ---- multi-locks (issue 26) ---- */

static long multi(struct th_client *c, const struct th_lockd *l, const char *method,
                  const char *body, const char *lease, struct th_resp *keep)
{
    char url[160];
    snprintf(url, sizeof(url), "%s/locks", l->url);
    return th_req(c, method, url, body, lease, keep);
}

struct mwaiter {
    const char *body;
    long status;
    int64_t done_ms;
    char lease[64];
};

static void *multi_wait(void *arg)
{
    struct mwaiter *w = arg;
    struct th_client *c = th_client_new();
    struct th_resp r;
    w->status = multi(c, &L[1], "POST", w->body, NULL, &r);
    w->done_ms = th_now_ms();
    if (w->status == 200)
        snprintf(w->lease, sizeof(w->lease), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    th_client_free(c);
    return NULL;
}

/* Names of one slot: one script call on its primary. Names on every
 * primary: taken one by one (never a cross-slot script), all or none,
 * and a waiting set on one lockd is granted after a release through the
 * other. */
static void t_multilock(void)
{
    struct th_client *c = th_client_new();
    /* two names of one slot */
    char same[2][32];
    snprintf(same[0], sizeof(same[0]), "ms-0");
    int slot = slot_of(same[0]);
    for (int k = 1;; k++) {
        snprintf(same[1], sizeof(same[1]), "ms-%d", k);
        if (slot_of(same[1]) == slot)
            break;
    }
    int o = owner_node(slot);
    CHECK(o >= 0);
    long long before =
        th_redis_calls(&node[o], "fcall") + th_redis_calls(&node[o], "function|load");
    char body[512];
    snprintf(body, sizeof(body), "{\"names\":[\"%s\",\"%s\"],\"ttl_ms\":10000}", same[0], same[1]);
    struct th_resp r;
    CHECK_EQ_INT(multi(c, &L[0], "POST", body, NULL, &r), 200);
    char lease[64];
    snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    long long after = th_redis_calls(&node[o], "fcall") + th_redis_calls(&node[o], "function|load");
    CHECK_EQ_INT(after - before, 1);
    snprintf(body, sizeof(body), "{\"names\":[\"%s\",\"%s\"]}", same[0], same[1]);
    CHECK_EQ_INT(multi(c, &L[1], "DELETE", body, lease, &r), 200);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "locks")), 2);
    th_resp_free(&r);

    /* ten names over every primary, one of them held through L[0] */
    int seen[N] = {0};
    size_t k = (size_t)snprintf(body, sizeof(body), "{\"names\":[");
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof(name), "mx-%d", i);
        seen[owner_node(slot_of(name))] = 1;
        k += (size_t)snprintf(body + k, sizeof(body) - k, "%s\"%s\"", i ? "," : "", name);
    }
    for (int i = 0; i < N; i++)
        CHECK(seen[i]);
    char names[600];
    snprintf(names, sizeof(names), "%s]}", body);
    CHECK_EQ_INT(req(c, &L[0], "POST", "mx-7", "{\"ttl_ms\":30000}", NULL, &r), 200);
    char hold[64];
    snprintf(hold, sizeof(hold), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    CHECK_EQ_INT(multi(c, &L[1], "POST", names, NULL, &r), 409);
    CHECK_STR(th_jstr(&r, "name"), "mx-7");
    th_resp_free(&r);
    for (int i = 0; i < 10; i++) { /* none of the set left held */
        char name[32];
        snprintf(name, sizeof(name), "mx-%d", i);
        req(c, &L[0], "GET", name, NULL, NULL, &r);
        CHECK(json_is_true(json_object_get(r.json, "held")) == (i == 7));
        th_resp_free(&r);
    }
    char wbody[700];
    snprintf(wbody, sizeof(wbody), "%s],\"wait_ms\":10000,\"ttl_ms\":10000}", body);
    struct mwaiter w = {.body = wbody};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, multi_wait, &w) == 0);
    th_sleep_ms(300);
    CHECK_EQ_INT(req(c, &L[0], "DELETE", "mx-7", NULL, hold, NULL), 200);
    int64_t released = th_now_ms();
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.status, 200);
    printf("# a set over %d primaries granted %lld ms after the release through the other lockd\n",
           N, (long long)(w.done_ms - released));
    CHECK(w.done_ms - released <= 2000 * th_time_scale());
    CHECK_EQ_INT(multi(c, &L[0], "DELETE", names, w.lease, &r), 200);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "locks")), 10);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "lost")), 0);
    th_resp_free(&r);
    th_client_free(c);
}

/* The ordered path's step answered 503 gives its name back: a set of two
 * names on two primaries, the second (in sorted order) on a primary frozen
 * (SIGSTOP) past backend_timeout_ms (1 s), so its step is answered 503 with
 * its script waiting in that primary's socket; the first name is rolled
 * back, the set answered 503; the primary resumed, the step's script runs,
 * and both names must be free again within 1 s, not at the set's ttl (20 s). */
static void t_multilock_in_doubt(void)
{
    struct th_client *c = th_client_new();
    const char *first = "md-a";
    int x = owner_node(slot_of(first)), y = -1;
    char second[32];
    for (int i = 0; y < 0 && i < 1000; i++) {
        snprintf(second, sizeof(second), "md-b%d", i);
        int o = owner_node(slot_of(second));
        if (o != x)
            y = o;
    }
    CHECK(x >= 0 && y >= 0);
    char body[160];
    snprintf(body, sizeof(body), "{\"names\":[\"%s\",\"%s\"],\"ttl_ms\":20000}", second, first);
    long long calls0 = th_redis_calls(&node[y], "fcall");
    kill(node[y].pid, SIGSTOP);
    long st = multi(c, &L[0], "POST", body, NULL, NULL);
    kill(node[y].pid, SIGCONT);
    int64_t t1 = th_now_ms();
    long long scale = th_time_scale();
    while (th_redis_calls(&node[y], "fcall") == calls0 && th_now_ms() - t1 < 1000 * scale)
        th_sleep_ms(5);
    bool ran = th_redis_calls(&node[y], "fcall") > calls0; /* the step's script */
    const char *names[2] = {first, second};
    int nfree = th_until_free(c, &L[0], names, 2, t1, 1000);
    printf("# the set answered %ld; the frozen primary's step %s; %d of 2 names free %lld ms "
           "after it resumed\n",
           st, ran ? "ran" : "never ran", nfree, (long long)(th_now_ms() - t1));
    CHECK_EQ_INT(st, 503);
    CHECK(ran);
    CHECK_EQ_INT(nfree, 2);
    th_client_free(c);
}

/* No script ever touched keys of two slots, or of another node's slot. */
static void check_log(const struct th_lockd *l)
{
    FILE *f = fopen(l->log, "r");
    CHECK(f != NULL);
    char line[4096];
    int bad = 0, moved = 0, ask = 0, again = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        moved += strstr(line, "command: MOVED") != NULL;
        ask += strstr(line, "command: ASK") != NULL;
        again += strstr(line, "command: TRYAGAIN") != NULL;
        if (strstr(line, "CROSSSLOT") || strstr(line, "same slot") || strstr(line, "non local") ||
            strstr(line, "Sanitizer") || strstr(line, "runtime error")) {
            fprintf(stderr, "%s", line);
            bad++;
        }
    }
    fclose(f);
    /* (logged at most once a second per connection) */
    printf("# %s: redirections logged: %d MOVED, %d ASK, %d TRYAGAIN\n", l->url, moved, ask, again);
    CHECK_EQ_INT(bad, 0);
}

/* ---- resharding a slot while one of its names is held ---- */

/* lockd_cluster_redirections_total{kind="<kind>"} of l, -1 when absent. */
static long long redirections(struct th_client *c, const struct th_lockd *l, const char *kind)
{
    char url[160], pat[96];
    snprintf(url, sizeof(url), "%s/metrics", l->url);
    snprintf(pat, sizeof(pat), "lockd_cluster_redirections_total{kind=\"%s\"} ", kind);
    struct th_resp r;
    th_http(c, "GET", url, NULL, NULL, &r);
    const char *p = r.body != NULL ? strstr(r.body, pat) : NULL;
    long long v = p != NULL ? atoll(p + strlen(pat)) : -1;
    th_resp_free(&r);
    return v;
}

/* The first half of moving slot from primary src to dst, as redis-cli
 * --cluster reshard does: IMPORTING on dst, MIGRATING on src. */
static void slot_migrating(int slot, int src, int dst)
{
    char sid[64], did[64], cmd[256];
    node_id(src, sid, sizeof(sid));
    node_id(dst, did, sizeof(did));
    snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %d IMPORTING %s", slot, sid);
    CHECK(strstr(th_redis_cli(&node[dst], cmd), "OK") != NULL);
    snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %d MIGRATING %s", slot, did);
    CHECK(strstr(th_redis_cli(&node[src], cmd), "OK") != NULL);
}

/* MIGRATEs every key of a migrating slot from src to dst, up to 100 a
 * round, 50 ms apart; returns how many. */
static int slot_migrate_keys(int slot, int src, int dst)
{
    char cmd[256];
    int moved = 0;
    for (int round = 0; round < 100; round++) {
        snprintf(cmd, sizeof(cmd), "CLUSTER GETKEYSINSLOT %d 100", slot);
        char keys[8192];
        snprintf(keys, sizeof(keys), "%s", th_redis_cli(&node[src], cmd));
        if (strspn(keys, " \r\n") == strlen(keys))
            break;
        /* keys are printed one per line */
        char mig[9000];
        size_t off = (size_t)snprintf(mig, sizeof(mig), "MIGRATE 127.0.0.1 %d \"\" 0 5000 KEYS",
                                      node[dst].port);
        char *save = NULL;
        for (char *key = strtok_r(keys, "\n", &save); key; key = strtok_r(NULL, "\n", &save)) {
            off += (size_t)snprintf(mig + off, sizeof(mig) - off, " '%s'", key);
            moved++;
        }
        th_redis_cli(&node[src], mig);
        th_sleep_ms(50);
    }
    return moved;
}

static void t_reshard_held(void)
{
    struct th_client *c = th_client_new();
    const char *held = "rs-held";
    int slot = slot_of(held);
    int src = owner_node(slot);
    CHECK(src >= 0);
    int dst = (src + 1) % N;
    /* more names of the same slot, under load through both lockd */
    int k = 0;
    for (int i = 0; k < NAMES && i < 2000000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "rs-%d", i);
        if (slot_of(name) == slot)
            snprintf(load_names[k++], sizeof(load_names[0]), "%s", name);
    }
    CHECK_EQ_INT(k, NAMES);
    struct th_resp r;
    CHECK_EQ_INT(req(c, &L[0], "POST", held, "{\"ttl_ms\":60000,\"owner\":\"keeper\"}", NULL, &r),
                 200);
    long long token = th_jint(&r, "fencing_token");
    th_resp_free(&r);
    load_start();
    th_sleep_ms(300);

    slot_migrating(slot, src, dst);
    th_sleep_ms(200); /* load runs against a migrating slot */
    int moved = slot_migrate_keys(slot, src, dst);
    th_sleep_ms(200); /* load runs against a slot whose keys are all on dst (ASK) */
    char did[64], cmd[256];
    node_id(dst, did, sizeof(did));
    snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %d NODE %s", slot, did);
    for (int i = 0; i < N; i++)
        CHECK(strstr(th_redis_cli(&node[i], cmd), "OK") != NULL);
    th_sleep_ms(500); /* and after the move: MOVED, then the new map */
    load_stop();
    printf("# slot %d: %d keys migrated from primary %d to %d under load\n", slot, moved, src, dst);
    /* what the source answered meanwhile: ASK while the slot migrated
     * (then ASKING on the destination), MOVED once it had moved */
    const char *es = th_redis_cli(&node[src], "INFO errorstats");
    const char *a = strstr(es, "errorstat_ASK:count="), *m = strstr(es, "errorstat_MOVED:count=");
    const char *t = strstr(es, "errorstat_TRYAGAIN:count=");
    printf("# source answered ASK %lld, MOVED %lld, TRYAGAIN %lld times\n", a ? atoll(a + 20) : 0LL,
           m ? atoll(m + 22) : 0LL, t ? atoll(t + 25) : 0LL);
    CHECK(a != NULL);
    CHECK(moved > 0);
    CHECK_EQ_INT(owner_node(slot), dst);
    /* lockd counted the redirections it followed (the source's ASKs went to them) */
    long long ask = redirections(c, &L[0], "ask"), mv = redirections(c, &L[0], "moved");
    long long ask1 = redirections(c, &L[1], "ask"), mv1 = redirections(c, &L[1], "moved");
    printf("# lockd followed ASK %lld + %lld, MOVED %lld + %lld\n", ask, ask1, mv, mv1);
    CHECK(mv >= 0 && mv1 >= 0);
    CHECK(ask + ask1 > 0);
    /* the held lock moved with its slot: same holder, same token */
    CHECK_EQ_INT(req(c, &L[1], "POST", held, "{\"ttl_ms\":1000}", NULL, &r), 409);
    json_t *h = json_object_get(r.json, "holder");
    CHECK(h != NULL);
    CHECK_EQ_INT(json_integer_value(json_object_get(h, "fencing_token")), token);
    th_resp_free(&r);
    /* and the names keep going on the new primary, tokens still increasing */
    for (int i = 0; i < NAMES; i++) {
        CHECK_EQ_INT(req(c, &L[i % 2], "POST", load_names[i], "{\"ttl_ms\":1000}", NULL, &r), 200);
        CHECK(th_jint(&r, "fencing_token") > ex.last[i]);
        th_resp_free(&r);
    }
    th_client_free(c);
}

/* ---- a slot moved (resharding finished): MOVED followed ---- */

/* The end of moving slot from src to dst: SETSLOT NODE on dst, on src, then
 * on the others. */
static void slot_owned_by(int slot, int src, int dst)
{
    char did[64], cmd[256];
    node_id(dst, did, sizeof(did));
    snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %d NODE %s", slot, did);
    CHECK(strstr(th_redis_cli(&node[dst], cmd), "OK") != NULL);
    CHECK(strstr(th_redis_cli(&node[src], cmd), "OK") != NULL);
    for (int i = 0; i < N; i++)
        if (i != src && i != dst)
            CHECK(strstr(th_redis_cli(&node[i], cmd), "OK") != NULL);
}

/* Moves slot (no keys in it) from its primary to the next one, the way
 * redis-cli --cluster reshard ends: IMPORTING/MIGRATING, then SETSLOT NODE
 * on the destination, the source and the others. */
static void move_empty_slot(int slot)
{
    int src = owner_node(slot);
    CHECK(src >= 0);
    int dst = (src + 1) % N;
    slot_migrating(slot, src, dst);
    slot_owned_by(slot, src, dst);
}

/* A name whose slot just moved (the lockd's map still names the old
 * primary): the request succeeds through the MOVED, and
 * lockd_cluster_redirections_total{kind="moved"} counts it. lockd also asks
 * for the map once a second; a refresh that lands between the move and the
 * request leaves nothing to follow, so a few slots are tried, each once per
 * lockd, until both lockd followed one. */
static void t_moved_followed(void)
{
    struct th_client *c = th_client_new();
    bool seen[2] = {false, false};
    int tries = 0;
    for (int i = 0; tries < 8 && !(seen[0] && seen[1]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "mv-%d", i);
        int slot = slot_of(name);
        if (slot == slot_of("rs-held")) /* moved already */
            continue;
        tries++;
        int src = owner_node(slot);
        long long before[2] = {redirections(c, &L[0], "moved"), redirections(c, &L[1], "moved")};
        CHECK(before[0] >= 0 && before[1] >= 0);
        move_empty_slot(slot);
        CHECK_EQ_INT(owner_node(slot), (src + 1) % N);
        for (int j = 0; j < 2; j++) {
            struct th_resp r;
            CHECK_EQ_INT(req(c, &L[j], "POST", name, "{\"ttl_ms\":5000}", NULL, &r), 200);
            char lease[64];
            snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
            th_resp_free(&r);
            CHECK_EQ_INT(req(c, &L[j], "DELETE", name, NULL, lease, NULL), 200);
            long long after = redirections(c, &L[j], "moved");
            if (after > before[j])
                seen[j] = true;
            printf("# slot %d moved %d -> %d: lockd %d followed %lld MOVED\n", slot, src,
                   (src + 1) % N, j, after - before[j]);
        }
        /* the lock key is on the new primary */
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "CLUSTER COUNTKEYSINSLOT %d", slot);
        CHECK(atoll(th_redis_cli(&node[(src + 1) % N], cmd)) > 0);
    }
    CHECK(seen[0]);
    CHECK(seen[1]);
    th_client_free(c);
}

/* n names of slots other than slot (the first of primary o, when o >= 0)
 * are served through L[j] at once. */
static void others_served(struct th_client *c, int j, int slot, int o, const char *prefix, int n)
{
    for (int i = 0, done = 0; done < n && i < 1000; i++) {
        char other[32];
        snprintf(other, sizeof(other), "%s-%d-%d", prefix, j, i);
        if (slot_of(other) == slot || (done == 0 && o >= 0 && owner_node(slot_of(other)) != o))
            continue;
        done++;
        int64_t t0 = th_now_ms();
        CHECK_EQ_INT(req(c, &L[j], "POST", other, "{\"ttl_ms\":1000}", NULL, NULL), 200);
        CHECK(th_now_ms() - t0 < 500 * th_time_scale());
    }
}

/* ---- a slot nobody serves: CLUSTERDOWN retried, then 503 ---- */

static long long errorstat(const struct th_redis *r, const char *what)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "errorstat_%s:count=", what);
    const char *es = th_redis_cli(r, "INFO errorstats");
    const char *p = strstr(es, pat);
    return p != NULL ? atoll(p + strlen(pat)) : 0;
}

/* CLUSTER DELSLOTS on the slot's primary: it answers "CLUSTERDOWN Hash slot
 * not served" (cluster-require-full-coverage no: only for that slot; the
 * other nodes still name it the owner). lockd
 * retries with growing pauses (RC_TRIES x RC_RETRY_MS, about 1 s in all, as
 * the README says) and then answers 503; names of other slots are served
 * meanwhile; ADDSLOTS brings the name back. */
static void t_clusterdown_bounded(void)
{
    struct th_client *c = th_client_new();
    /* a slot of primary 1: not a seed, so the map lockd keeps asking for
     * (from node 0, which goes on naming node 1 the owner) sends every try
     * to node 1 */
    char name[32];
    int slot = -1, o = 1;
    for (int i = 0; slot < 0 && i < 1000; i++) {
        snprintf(name, sizeof(name), "cd-%d", i);
        if (owner_node(slot_of(name)) == o)
            slot = slot_of(name);
    }
    CHECK(slot >= 0);
    CHECK_EQ_INT(req(c, &L[0], "POST", name, "{\"ttl_ms\":5000}", NULL, NULL), 200);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "CLUSTER COUNTKEYSINSLOT %d", slot);
    CHECK(atoll(th_redis_cli(&node[o], cmd)) > 0);
    /* the slot's keys stay on the node; only its service stops */
    snprintf(cmd, sizeof(cmd), "CLUSTER DELSLOTS %d", slot);
    CHECK(strstr(th_redis_cli(&node[o], cmd), "OK") != NULL);
    for (int j = 0; j < 2; j++) {
        long long down0 = errorstat(&node[o], "CLUSTERDOWN");
        int64_t t0 = th_now_ms();
        struct th_resp r;
        long st = req(c, &L[j], "POST", name, "{\"ttl_ms\":5000}", NULL, &r);
        int64_t took = th_now_ms() - t0;
        long long downs = errorstat(&node[o], "CLUSTERDOWN") - down0;
        printf("# lockd %d: %ld %s after %lld ms, %lld CLUSTERDOWN answers\n", j, st,
               th_jerr(&r) ? th_jerr(&r) : "", (long long)took, downs);
        CHECK_EQ_INT(st, 503);
        th_resp_free(&r);
        /* retried (more than one CLUSTERDOWN, with pauses: 8 tries sleep
         * 0.9 s), and bounded */
        CHECK(downs >= 2);
        CHECK(took >= 500);
        CHECK(took <= 3000 * th_time_scale());
        others_served(c, j, slot, o, "cd-ok", 3); /* of this primary too */
    }
    snprintf(cmd, sizeof(cmd), "CLUSTER ADDSLOTS %d", slot);
    CHECK(strstr(th_redis_cli(&node[o], cmd), "OK") != NULL);
    /* served again, and the lock held before is still held */
    struct th_resp r;
    long st = 0;
    for (int64_t t0 = th_now_ms(); th_now_ms() - t0 < 10000 * th_time_scale();) {
        st = req(c, &L[1], "POST", name, "{\"ttl_ms\":1000}", NULL, &r);
        if (st != 503)
            break;
        th_resp_free(&r);
    }
    CHECK_EQ_INT(st, 409);
    th_resp_free(&r);
    th_client_free(c);
}

/* ---- a script's keys split by a migration: TRYAGAIN retried, then 503 ---- */

/* A free name (its lock key gone with the release, its fence counter kept)
 * in a slot set MIGRATING on its primary and IMPORTING on the next: the
 * acquire script names both keys, and the source has one of them but not
 * the other, so it answers TRYAGAIN (Redis: a multi-key request during a
 * migration; the importing node answers so too once both left, for a
 * request behind ASKING). lockd retries with growing pauses (RC_TRIES x
 * RC_RETRY_MS, about 1 s) and answers 503, never a grant; names of other
 * slots are served meanwhile. Once the counter moved and the slot is the
 * destination's, the name is granted with a token above the last one. */
static void t_tryagain_bounded(void)
{
    struct th_client *c = th_client_new();
    char name[32];
    int slot = -1;
    for (int i = 0; slot < 0 && i < 1000; i++) {
        snprintf(name, sizeof(name), "ta-%d", i);
        if (slot_of(name) != slot_of("rs-held"))
            slot = slot_of(name);
    }
    int src = owner_node(slot), dst = (src + 1) % N;
    CHECK(src >= 0);
    struct th_resp r;
    CHECK_EQ_INT(req(c, &L[0], "POST", name, "{\"ttl_ms\":5000}", NULL, &r), 200);
    long long token = th_jint(&r, "fencing_token");
    char lease[64];
    snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    CHECK_EQ_INT(req(c, &L[0], "DELETE", name, NULL, lease, NULL), 200);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "CLUSTER COUNTKEYSINSLOT %d", slot);
    CHECK(atoll(th_redis_cli(&node[src], cmd)) > 0); /* the fence counter */
    slot_migrating(slot, src, dst);
    for (int j = 0; j < 2; j++) {
        long long again0 = errorstat(&node[src], "TRYAGAIN") + errorstat(&node[dst], "TRYAGAIN");
        int64_t t0 = th_now_ms();
        long st = req(c, &L[j], "POST", name, "{\"ttl_ms\":5000}", NULL, &r);
        int64_t took = th_now_ms() - t0;
        long long again =
            errorstat(&node[src], "TRYAGAIN") + errorstat(&node[dst], "TRYAGAIN") - again0;
        printf("# lockd %d: %ld %s after %lld ms, %lld TRYAGAIN answers\n", j, st,
               th_jerr(&r) ? th_jerr(&r) : "", (long long)took, again);
        CHECK_EQ_INT(st, 503);
        th_resp_free(&r);
        CHECK(again >= 2); /* retried, with pauses, and bounded */
        CHECK(took >= 500);
        CHECK(took <= 3000 * th_time_scale());
        others_served(c, j, slot, -1, "ta-ok", 2);
    }
    /* the counter moves, the slot is the destination's */
    CHECK(slot_migrate_keys(slot, src, dst) > 0);
    slot_owned_by(slot, src, dst);
    CHECK_EQ_INT(owner_node(slot), dst);
    CHECK_EQ_INT(req(c, &L[1], "POST", name, "{\"ttl_ms\":5000}", NULL, &r), 200);
    CHECK(th_jint(&r, "fencing_token") > token);
    snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    CHECK_EQ_INT(req(c, &L[1], "DELETE", name, NULL, lease, NULL), 200);
    th_client_free(c);
}

/* ---- sessions over HTTP ---- */

/* A session on L[0] holds a name whose lease (600 ms) it outlives several
 * times while heartbeated (the watchdog renews it); L[1] cannot take it.
 * Heartbeats stop: the session expires (ttl 1 s), its lock is released with
 * a lock-delay of 500 ms, and only then L[1] gets it. */
static void t_sessions(void)
{
    struct th_client *c = th_client_new();
    th_session_handoff(c, &L[0], &L[1], "sess-0");
    th_client_free(c);
}

/* ---- one primary killed ---- */

static void t_primary_killed(void)
{
    struct th_client *c = th_client_new();
    int victim = 2;
    th_redis_stop(&node[victim]);
    int ok = 0, down = 0;
    for (int i = 0; i < 60; i++) {
        char name[32];
        snprintf(name, sizeof(name), "kill-%d", i);
        int o = owner_node(slot_of(name));
        int64_t t0 = th_now_ms();
        long st = req(c, &L[i % 2], "POST", name, "{\"ttl_ms\":5000}", NULL, NULL);
        if (o == victim) {
            CHECK_EQ_INT(st, 503);
            CHECK(th_now_ms() - t0 < 3000);
            down++;
        } else {
            CHECK_EQ_INT(st, 200);
            ok++;
        }
    }
    printf("# %d names served by the live primaries, %d answered 503\n", ok, down);
    CHECK(ok > 0 && down > 0);
    char url[160];
    snprintf(url, sizeof(url), "%s/readyz", L[0].url);
    struct th_resp r;
    th_http(c, "GET", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 503);
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/metrics", L[0].url);
    th_http(c, "GET", url, NULL, NULL, &r);
    int up = 0;
    for (const char *p = strstr(r.body, "lockd_backend_up{"); p;
         p = strstr(p + 1, "lockd_backend_up{"))
        up += strstr(p, "} 1") == strchr(p, '}');
    CHECK_EQ_INT(up, N - 1);
    th_resp_free(&r);
    th_client_free(c);
}

int main(void)
{
    th_cluster_start(node, N, NULL);
    lockd_on(&L[0]);
    lockd_on(&L[1]);
    TH_RUN(t_spread);
    TH_RUN(t_two_lockd_16_clients);
    TH_RUN(t_waiter_woken_across_lockd);
    TH_RUN(t_waiter_shorter_across_lockd);
    TH_RUN(t_multilock);
    TH_RUN(t_multilock_in_doubt);
    TH_RUN(t_reshard_held);
    TH_RUN(t_moved_followed);
    TH_RUN(t_clusterdown_bounded);
    TH_RUN(t_tryagain_bounded);
    TH_RUN(t_sessions);
    TH_RUN(t_primary_killed);
    /* a clean exit: drained, every connection and thread freed (ASan) */
    CHECK_EQ_INT(th_lockd_signal_wait(&L[0], SIGTERM, 30000 * th_time_scale()), 0);
    CHECK_EQ_INT(th_lockd_signal_wait(&L[1], SIGTERM, 30000 * th_time_scale()), 0);
    check_log(&L[0]);
    check_log(&L[1]);
    for (int i = 0; i < N; i++)
        th_redis_stop(&node[i]);
    return th_done();
}
