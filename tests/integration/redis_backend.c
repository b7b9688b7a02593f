/*
 * redis_backend.c - drives the redis backend directly through backend_ops on
 * one lk_loop run by this thread, against real redis-server processes on
 * free loopback ports: grants, conflicts, owner checks, one FCALL per
 * operation, groups of operations, the fallback when Redis lost the functions, Redis
 * killed/hung/restarted, AUTH and ACL, batch renewals, pub/sub, lock-delay, fencing across data
 * loss, WAIT, and a request that arrives while the connection is being re-established.
 */
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/loop.h"
#include "server/util.h"
#include "tests/lib/harness.h"

#define LEASE_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define LEASE_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define TIMEOUT_MS 500 /* backend_timeout_ms for these tests */

struct fx {
    struct lk_config cfg;
    struct backend be;
    struct lk_loop *lp;
};

static const char *next_timeout = "500"; /* backend_timeout_ms of the next fx_open */

static void cfg_make(struct lk_config *cfg, const char *url, const char *wait_replicas)
{
    char err[256];
    config_defaults(cfg);
    CHECK(config_set(cfg, "redis", url, "test", err, sizeof(err)) == 0);
    CHECK(config_set(cfg, "backend", "redis", "test", err, sizeof(err)) == 0);
    CHECK(config_set(cfg, "key_prefix", "t:", "test", err, sizeof(err)) == 0);
    CHECK(config_set(cfg, "backend_timeout_ms", next_timeout, "test", err, sizeof(err)) == 0);
    if (wait_replicas != NULL)
        CHECK(config_set(cfg, "redis_wait_replicas", wait_replicas, "test", err, sizeof(err)) == 0);
}

static void url_of(const struct th_redis *r, const char *cred, char *out, size_t cap)
{
    snprintf(out, cap, "redis://%s%s127.0.0.1:%d", cred ? cred : "", cred ? "@" : "", r->port);
}

/* ---- running the loop until a callback fired ---- */

static void on_tick(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)w;
    (void)revents;
}

/* Runs lp until *flag or timeout; a 5 ms ticker keeps ev_run from blocking. */
static bool run_until(struct fx *f, const bool *flag, int64_t timeout_ms)
{
    struct ev_loop *ev = loop_ev(f->lp);
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.005, 0.005);
    ev_timer_start(ev, &tick);
    int64_t end = th_now_ms() + timeout_ms;
    while (!*flag && th_now_ms() < end)
        ev_run(ev, EVRUN_ONCE);
    ev_timer_stop(ev, &tick);
    return *flag;
}

static void run_for(struct fx *f, int64_t ms)
{
    bool never = false;
    (void)run_until(f, &never, ms);
}

static bool node_up(struct fx *f)
{
    struct bk_node n;
    CHECK_EQ_INT(f->be.ops->nodes(f->be.state, &n, 1), 1);
    return n.up;
}

static bool wait_node(struct fx *f, bool up, int64_t timeout_ms)
{
    int64_t end = th_now_ms() + timeout_ms;
    while (node_up(f) != up && th_now_ms() < end)
        run_for(f, 10);
    return node_up(f) == up;
}

static void fx_open(struct fx *f, const char *url, const char *wait_replicas)
{
    char err[256] = "";
    memset(f, 0, sizeof(*f));
    cfg_make(&f->cfg, url, wait_replicas);
    enum lk_code rc = backend_redis_new(&f->cfg, &f->be, err, sizeof(err));
    if (rc != LK_OK)
        th_fail(__FILE__, __LINE__, "backend_redis_new: %s", err);
    CHECK_STR(f->be.ops->name, "redis");
    f->lp = loop_new(0);
    CHECK_EQ_INT(f->be.ops->attach(f->be.state, f->lp), LK_OK);
}

static void fx_close(struct fx *f)
{
    f->be.ops->detach(f->be.state, f->lp);
    f->be.ops->free(f->be.state);
    loop_free(f->lp);
    config_free(&f->cfg);
}

/* fx_open on r with no credentials and no WAIT: how most cases start. */
static void fx_open_on(struct fx *f, const struct th_redis *r)
{
    char url[128];
    url_of(r, NULL, url, sizeof(url));
    fx_open(f, url, NULL);
}

/* ---- synchronous wrappers that also check the completion contract ---- */

/* A bk_res kept past its callback: the first holder copied (the backend's
 * holder list lives only during the callback); held = someone holds it. */
struct reply {
    enum lk_code code;
    int64_t fencing_token, ttl_ms, validity_ms, delay_ms;
    int64_t index;
    size_t nholders;
    bool held;
    struct bk_holder holder;
};

struct res {
    bool done;
    int calls;
    struct reply r;
};

static void reply_keep(struct reply *out, const struct bk_res *r)
{
    memset(out, 0, sizeof(*out));
    out->code = r->code;
    out->fencing_token = r->fencing_token;
    out->ttl_ms = r->ttl_ms;
    out->validity_ms = r->validity_ms;
    out->delay_ms = r->delay_ms;
    out->index = r->index;
    out->nholders = r->nholders;
    out->held = r->nholders > 0;
    CHECK(r->nholders <= 1); /* exclusive locks only */
    if (r->nholders > 0) {
        CHECK(r->holders != NULL);
        out->holder = r->holders[0];
        CHECK_EQ_INT(out->holder.mode, BK_EXCLUSIVE);
        CHECK_EQ_INT(out->delay_ms, 0); /* held, so no lock-delay runs */
    }
}

static void on_done(void *arg, const struct bk_res *r)
{
    struct res *x = arg;
    x->calls++;
    x->done = true;
    reply_keep(&x->r, r);
}

/* LK_OK means the callback already ran; LK_AGAIN that it did not yet. */
static void settle(struct fx *f, enum lk_code rc, struct res *x)
{
    if (rc == LK_OK)
        CHECK(x->done);
    else {
        CHECK_EQ_INT(rc, LK_AGAIN);
        CHECK(!x->done);
    }
    CHECK(run_until(f, &x->done, 5000));
    CHECK_EQ_INT(x->calls, 1);
}

/* wait: the caller is a waiter that wants to hear of the release if refused */
static struct bk_req acquire_req(const char *name, const char *lease, int64_t ttl_ms,
                                 const char *owner, bool session_bound, bool wait)
{
    struct bk_req a = {.op = BK_ACQUIRE,
                       .name = name,
                       .lease = lease,
                       .owner = owner,
                       .mode = BK_EXCLUSIVE,
                       .limit = 1,
                       .ttl_ms = ttl_ms,
                       .session_bound = session_bound,
                       .wait = wait};
    return a;
}

static enum lk_code submit(struct fx *f, const struct bk_req *req, bk_done_fn done, void *arg)
{
    return f->be.ops->submit(f->be.state, f->lp, req, done, arg);
}

static struct reply acquire_as(struct fx *f, const char *name, const char *lease, int64_t ttl_ms,
                               const char *owner, bool wait)
{
    struct res x;
    memset(&x, 0, sizeof(x));
    struct bk_req a = acquire_req(name, lease, ttl_ms, owner, false, wait);
    settle(f, submit(f, &a, on_done, &x), &x);
    return x.r;
}

static struct reply acquire(struct fx *f, const char *name, const char *lease, int64_t ttl_ms,
                            const char *owner)
{
    return acquire_as(f, name, lease, ttl_ms, owner, false);
}

static struct reply renew(struct fx *f, const char *name, const char *lease, int64_t ttl_ms)
{
    struct res x;
    memset(&x, 0, sizeof(x));
    struct bk_req q = {.op = BK_RENEW, .name = name, .lease = lease, .ttl_ms = ttl_ms};
    settle(f, submit(f, &q, on_done, &x), &x);
    return x.r;
}

static struct bk_req release_req(const char *name, const char *lease, int64_t delay_ms)
{
    struct bk_req q = {.op = BK_RELEASE, .name = name, .lease = lease, .delay_ms = delay_ms};
    return q;
}

static struct reply release(struct fx *f, const char *name, const char *lease, int64_t delay_ms)
{
    struct res x;
    memset(&x, 0, sizeof(x));
    struct bk_req q = release_req(name, lease, delay_ms);
    settle(f, submit(f, &q, on_done, &x), &x);
    return x.r;
}

static struct reply inspect(struct fx *f, const char *name)
{
    struct res x;
    memset(&x, 0, sizeof(x));
    struct bk_req q = {.op = BK_INSPECT, .name = name};
    settle(f, submit(f, &q, on_done, &x), &x);
    return x.r;
}

/* Commands clients sent, from INFO commandstats: every command except those
 * that only run inside lockd's scripts (total_commands_processed counts
 * those too). The INFO call itself is counted by the next reading. */
static long long redis_total(const struct th_redis *r)
{
    static const char *const inner[] = {"get",     "set",     "setrange", "pttl", "del",
                                        "pexpire", "publish", "scan",     NULL};
    const char *s = th_redis_cli(r, "INFO commandstats");
    long long total = 0;
    while ((s = strstr(s, "cmdstat_")) != NULL) {
        s += strlen("cmdstat_");
        size_t len = strcspn(s, ":");
        bool skip = false;
        for (int i = 0; inner[i] != NULL; i++)
            if (strlen(inner[i]) == len && strncmp(s, inner[i], len) == 0)
                skip = true;
        const char *c = strstr(s, "calls=");
        CHECK(c != NULL);
        if (!skip)
            total += atoll(c + strlen("calls="));
    }
    return total;
}

/* ---- cases ---- */

static struct th_redis R; /* the shared server of the plain cases */

static void t_grant_and_conflict(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    struct reply a = acquire(&f, "gc", LEASE_A, 5000, "alice");
    CHECK_EQ_INT(a.code, LK_OK);
    CHECK(a.fencing_token > 0);
    CHECK(a.fencing_token < (1LL << 53));
    CHECK_EQ_INT(a.ttl_ms, 5000);
    CHECK_EQ_INT(a.validity_ms, 5000); /* one node: valid for its whole ttl */
    struct reply b = acquire(&f, "gc", LEASE_B, 5000, "bob");
    CHECK_EQ_INT(b.code, LK_LOCKED);
    CHECK_STR(b.holder.owner, "alice");
    CHECK_EQ_INT(b.holder.fencing_token, a.fencing_token);
    CHECK(b.holder.expires_in_ms > 4000 && b.holder.expires_in_ms <= 5000);
    CHECK_EQ_INT(b.nholders, 1);
    CHECK_EQ_INT(b.delay_ms, 0); /* held, not in a lock-delay */
    struct reply i = inspect(&f, "gc");
    CHECK_EQ_INT(i.code, LK_OK);
    CHECK(i.held);
    CHECK_STR(i.holder.owner, "alice");
    CHECK_EQ_INT(i.holder.fencing_token, a.fencing_token);
    i = inspect(&f, "gc-free");
    CHECK_EQ_INT(i.code, LK_OK);
    CHECK(!i.held);
    /* keys share the {name} hash tag under the prefix, with a PX ttl */
    CHECK(strstr(th_redis_cli(&R, "PTTL t:{gc}"), "-") == NULL);
    CHECK(atoll(th_redis_cli(&R, "EXISTS t:{gc}:fence")) == 1);
    /* the owner is the lock value's last field: spaces, digits and line
     * breaks in it come back as they went in, through every script */
    static const char odd[] = "a b 1 0 9\n\"x\" 7 ";
    CHECK_EQ_INT(acquire(&f, "gc-odd", LEASE_A, 5000, odd).code, LK_OK);
    CHECK_STR(acquire(&f, "gc-odd", LEASE_B, 5000, "").holder.owner, odd);
    CHECK_EQ_INT(renew(&f, "gc-odd", LEASE_A, 7000).code, LK_OK);
    CHECK_STR(inspect(&f, "gc-odd").holder.owner, odd);
    CHECK_STR(release(&f, "gc-odd", LEASE_B, 0).holder.owner, odd);
    CHECK_EQ_INT(release(&f, "gc-odd", LEASE_A, 0).code, LK_OK);
    fx_close(&f);
}

static void t_owner_checks(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    struct reply a = acquire(&f, "oc", LEASE_A, 3000, "alice");
    CHECK_EQ_INT(a.code, LK_OK);
    struct reply r = renew(&f, "oc", LEASE_B, 9000);
    CHECK_EQ_INT(r.code, LK_HELD_BY_OTHER);
    CHECK_STR(r.holder.owner, "alice");
    r = release(&f, "oc", LEASE_B, 0);
    CHECK_EQ_INT(r.code, LK_HELD_BY_OTHER);
    /* the lease is compared whole inside the lock's value: a prefix of it,
     * the lease with more after it, or empty never release or renew it */
    static const char *const near[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", LEASE_A "a", LEASE_A " 1",
                                       ""};
    for (size_t k = 0; k < sizeof(near) / sizeof(near[0]); k++) {
        CHECK_EQ_INT(release(&f, "oc", near[k], 0).code, LK_HELD_BY_OTHER);
        CHECK_EQ_INT(renew(&f, "oc", near[k], 9000).code, LK_HELD_BY_OTHER);
    }
    CHECK(inspect(&f, "oc").held);
    /* nor does a lease found elsewhere in the value, at the lease's length
     * from a space: here the owner is another lease */
    CHECK_EQ_INT(acquire(&f, "oc-own", LEASE_A, 3000, LEASE_B).code, LK_OK);
    CHECK_EQ_INT(release(&f, "oc-own", LEASE_B, 0).code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(renew(&f, "oc-own", LEASE_B, 9000).code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(release(&f, "oc-own", LEASE_A, 0).code, LK_OK);
    r = renew(&f, "oc", LEASE_A, 8000);
    CHECK_EQ_INT(r.code, LK_OK);
    CHECK_EQ_INT(r.fencing_token, a.fencing_token); /* renew keeps the token */
    CHECK_EQ_INT(r.ttl_ms, 8000);
    CHECK_EQ_INT(r.validity_ms, 8000);
    CHECK(inspect(&f, "oc").holder.expires_in_ms > 7000);
    CHECK_STR(inspect(&f, "oc").holder.owner, "alice"); /* a new ttl rewrites the lock */
    r = renew(&f, "oc", LEASE_A, 0);                    /* 0 = the ttl last given */
    CHECK_EQ_INT(r.code, LK_OK);
    CHECK_EQ_INT(r.ttl_ms, 8000);
    r = release(&f, "oc", LEASE_A, 0);
    CHECK_EQ_INT(r.code, LK_OK);
    CHECK_EQ_INT(r.fencing_token, a.fencing_token);
    CHECK(!inspect(&f, "oc").held);
    CHECK_EQ_INT(renew(&f, "oc", LEASE_A, 1000).code, LK_NOT_HELD);
    CHECK_EQ_INT(release(&f, "oc", LEASE_A, 0).code, LK_NOT_HELD);
    /* a 300 ms lease frees itself */
    CHECK_EQ_INT(acquire(&f, "oc", LEASE_A, 300, "").code, LK_OK);
    CHECK_EQ_INT(acquire(&f, "oc", LEASE_B, 300, "").code, LK_LOCKED);
    th_sleep_ms(400);
    CHECK_EQ_INT(acquire(&f, "oc", LEASE_B, 300, "").code, LK_OK);
    fx_close(&f);
}

static void t_one_command_per_op(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    CHECK(wait_node(&f, true, 2000));
    run_for(&f, 50); /* let the connection's hello settle */
    long long t0 = redis_total(&R), e0 = th_redis_calls(&R, "fcall");
    CHECK_EQ_INT(acquire(&f, "one", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(renew(&f, "one", LEASE_A, 5000).code, LK_OK);
    CHECK_EQ_INT(release(&f, "one", LEASE_A, 0).code, LK_OK);
    long long t1 = redis_total(&R), e1 = th_redis_calls(&R, "fcall");
    CHECK_EQ_INT(e1 - e0, 3);
    /* three operations plus our own two INFO calls: nothing else was sent */
    CHECK_EQ_INT(t1 - t0, 3 + 2);
    fx_close(&f);
}

/* ---- groups: the acquires (releases) one loop turn makes share a call ---- */

#define GROUP_N 40

/* Submits op k of ops[] for every k in one loop turn: no ev_run between. */
struct gop {
    char name[32];
    const char *lease;
    int64_t delay_ms;
    struct res x;
};

static void group_submit(struct fx *f, struct gop *ops, int n, bool release_op)
{
    for (int k = 0; k < n; k++) {
        memset(&ops[k].x, 0, sizeof(ops[k].x));
        enum lk_code rc;
        if (release_op) {
            struct bk_req q = release_req(ops[k].name, ops[k].lease, ops[k].delay_ms);
            rc = submit(f, &q, on_done, &ops[k].x);
        } else {
            struct bk_req a = acquire_req(ops[k].name, ops[k].lease, 5000, "grouped", false, false);
            rc = submit(f, &a, on_done, &ops[k].x);
        }
        CHECK_EQ_INT(rc, LK_AGAIN); /* queued or sent, never answered on the spot */
        CHECK(!ops[k].x.done);
    }
    for (int k = 0; k < n; k++) {
        CHECK(run_until(f, &ops[k].x.done, 5000));
        CHECK_EQ_INT(ops[k].x.calls, 1);
    }
}

static void gop_set(struct gop *o, const char *name, const char *lease, int64_t delay_ms)
{
    snprintf(o->name, sizeof(o->name), "%s", name);
    o->lease = lease;
    o->delay_ms = delay_ms;
}

static long long lock_keys(const char *pattern)
{
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "EVAL \"return #redis.call('KEYS', ARGV[1])\" 0 %s", pattern);
    return atoll(th_redis_cli(&R, cmd));
}

static void t_groups(void)
{
    char name[32];
    struct fx f;
    fx_open_on(&f, &R);
    CHECK(wait_node(&f, true, 2000));
    run_for(&f, 50);
    static struct gop ops[GROUP_N + 1];
    /* 40 acquires in one turn: three calls (16, 16, 8), each answered alone */
    for (int k = 0; k < GROUP_N; k++) {
        snprintf(name, sizeof(name), "grp-%d", k);
        gop_set(&ops[k], name, LEASE_A, 0);
    }
    long long e0 = th_redis_calls(&R, "fcall");
    group_submit(&f, ops, GROUP_N, false);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 3);
    int64_t token[GROUP_N];
    for (int k = 0; k < GROUP_N; k++) {
        CHECK_EQ_INT(ops[k].x.r.code, LK_OK);
        CHECK_EQ_INT(ops[k].x.r.ttl_ms, 5000);
        token[k] = ops[k].x.r.fencing_token;
        CHECK(token[k] > 0 && token[k] < (1LL << 53));
        CHECK(inspect(&f, ops[k].name).held);
        CHECK_EQ_INT(inspect(&f, ops[k].name).holder.fencing_token, token[k]);
    }
    /* mixed answers in one group: held (with its holder), in a lock-delay,
     * free */
    CHECK_EQ_INT(acquire(&f, "grp-d", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(release(&f, "grp-d", LEASE_A, 3000).code, LK_OK);
    gop_set(&ops[0], "grp-3", LEASE_B, 0);
    gop_set(&ops[1], "grp-d", LEASE_B, 0);
    gop_set(&ops[2], "grp-new", LEASE_B, 0);
    gop_set(&ops[3], "grp-7", LEASE_B, 0);
    e0 = th_redis_calls(&R, "fcall");
    group_submit(&f, ops, 4, false);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 1);
    CHECK_EQ_INT(ops[0].x.r.code, LK_LOCKED);
    CHECK_STR(ops[0].x.r.holder.owner, "grouped");
    CHECK_EQ_INT(ops[0].x.r.holder.fencing_token, token[3]);
    CHECK(ops[0].x.r.holder.expires_in_ms > 3000);
    CHECK_EQ_INT(ops[1].x.r.code, LK_LOCKED);
    CHECK_EQ_INT(ops[1].x.r.nholders, 0); /* nobody holds it: a lock-delay runs */
    CHECK(ops[1].x.r.delay_ms > 2000 && ops[1].x.r.delay_ms <= 3000);
    CHECK_EQ_INT(ops[2].x.r.code, LK_OK);
    CHECK_EQ_INT(ops[3].x.r.code, LK_LOCKED);
    CHECK_EQ_INT(ops[3].x.r.holder.fencing_token, token[7]);
    /* 41 releases in one turn: a wrong lease, a free name, the right leases */
    gop_set(&ops[0], "grp-0", LEASE_B, 0);
    for (int k = 1; k < GROUP_N; k++) {
        snprintf(name, sizeof(name), "grp-%d", k);
        gop_set(&ops[k], name, LEASE_A, 0);
    }
    gop_set(&ops[GROUP_N], "grp-free", LEASE_A, 0);
    e0 = th_redis_calls(&R, "fcall");
    group_submit(&f, ops, GROUP_N + 1, true);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 3);
    CHECK_EQ_INT(ops[0].x.r.code, LK_HELD_BY_OTHER);
    CHECK_STR(ops[0].x.r.holder.owner, "grouped");
    CHECK_EQ_INT(ops[0].x.r.holder.fencing_token, token[0]);
    for (int k = 1; k < GROUP_N; k++) {
        CHECK_EQ_INT(ops[k].x.r.code, LK_OK);
        CHECK_EQ_INT(ops[k].x.r.fencing_token, token[k]);
        CHECK(!inspect(&f, ops[k].name).held);
    }
    CHECK_EQ_INT(ops[GROUP_N].x.r.code, LK_NOT_HELD);
    CHECK(inspect(&f, "grp-0").held);
    /* the names' fence counters lost (a Redis that lost its data): a group's
     * tokens still rise above the old ones, from lockd's wall clock */
    th_redis_cli(&R, "EVAL \"for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                     "redis.call('DEL', k) end\" 0 t:{grp-*}:fence");
    CHECK_EQ_INT(lock_keys("t:{grp-1*}:fence"), 0);
    for (int k = 1; k < 17; k++) {
        snprintf(name, sizeof(name), "grp-%d", k);
        gop_set(&ops[k - 1], name, LEASE_B, 0);
    }
    group_submit(&f, ops, 16, false);
    for (int k = 1; k < 17; k++) {
        CHECK_EQ_INT(ops[k - 1].x.r.code, LK_OK);
        CHECK(ops[k - 1].x.r.fencing_token > token[k]);
    }
    /* Redis refuses the whole call (here the user may no longer run
     * scripts): every member is answered 503 by that answer, well before
     * its deadline, and none is granted */
    th_redis_cli(&R, "ACL SETUSER default -fcall");
    for (int k = 0; k < 5; k++) {
        snprintf(name, sizeof(name), "grp-acl%d", k);
        gop_set(&ops[k], name, LEASE_A, 0);
    }
    int64_t t0 = th_now_ms();
    group_submit(&f, ops, 5, false);
    CHECK(th_now_ms() - t0 < TIMEOUT_MS / 2);
    th_redis_cli(&R, "ACL SETUSER default +@all");
    for (int k = 0; k < 5; k++)
        CHECK_EQ_INT(ops[k].x.r.code, LK_BACKEND_DOWN);
    run_for(&f, 100);
    CHECK_EQ_INT(lock_keys("t:{grp-acl*}"), 0);
    /* a fence counter that is not a number makes that lock's calls raise:
     * that acquire alone fails, and holds nothing */
    th_redis_cli(&R, "SET t:{grp-bad}:fence x");
    for (int k = 0; k < 6; k++) {
        snprintf(name, sizeof(name), k == 2 ? "grp-bad" : "grp-ok%d", k);
        gop_set(&ops[k], name, LEASE_A, 0);
    }
    e0 = th_redis_calls(&R, "fcall");
    group_submit(&f, ops, 6, false);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 1);
    for (int k = 0; k < 6; k++) {
        CHECK_EQ_INT(ops[k].x.r.code, k == 2 ? LK_BACKEND_DOWN : LK_OK);
        CHECK_EQ_INT(inspect(&f, ops[k].name).held, k != 2);
    }
    CHECK_EQ_INT(lock_keys("t:{grp-bad}"), 0);
    /* the same alone (acquire.lua): the script itself gives the lock back,
     * since lockd undoes only members of a group */
    th_redis_cli(&R, "SET t:{one-bad}:fence x");
    CHECK_EQ_INT(acquire(&f, "one-bad", LEASE_A, 5000, "").code, LK_BACKEND_DOWN);
    CHECK_EQ_INT(lock_keys("t:{one-bad}"), 0);
    /* Redis out of memory: every acquire of the group fails (Redis refuses
     * acquire_many.lua's FCALL before it runs: no allow-oom), none holds,
     * and each is undone (one release.lua call each, compare-and-delete:
     * allow-oom, it runs) */
    th_redis_cli(&R, "CONFIG SET maxmemory 1");
    for (int k = 0; k < 5; k++) {
        snprintf(name, sizeof(name), "grp-oom%d", k);
        gop_set(&ops[k], name, LEASE_A, 0);
    }
    e0 = th_redis_calls(&R, "fcall");
    group_submit(&f, ops, 5, false);
    run_for(&f, 100);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 5);
    th_redis_cli(&R, "CONFIG SET maxmemory 0");
    for (int k = 0; k < 5; k++)
        CHECK_EQ_INT(ops[k].x.r.code, LK_BACKEND_DOWN);
    CHECK_EQ_INT(lock_keys("t:{grp-oom*}"), 0);
    /* a group after FUNCTION FLUSH: one FUNCTION LOAD brings acquire_many.lua back */
    th_redis_cli(&R, "FUNCTION FLUSH");
    long long v0 = th_redis_calls(&R, "function|load");
    group_submit(&f, ops, 5, false);
    CHECK_EQ_INT(th_redis_calls(&R, "function|load") - v0, 1);
    for (int k = 0; k < 5; k++)
        CHECK_EQ_INT(ops[k].x.r.code, LK_OK);
    fx_close(&f);
}

/* ---- shared acquires (readers, semaphore slots) share a call too ---- */

struct sres {
    bool done;
    int calls;
    enum lk_code code;
    int64_t token, limit;
    size_t nholders, total;
    int64_t index, ttl_ms;
    struct bk_holder holder;
};

static void on_sdone(void *arg, const struct bk_res *r)
{
    struct sres *x = arg;
    x->calls++;
    x->done = true;
    x->code = r->code;
    x->token = r->fencing_token;
    x->limit = r->limit;
    x->nholders = r->nholders;
    x->total = r->total_holders;
    x->index = r->index;
    x->ttl_ms = r->ttl_ms;
    if (r->nholders > 0)
        x->holder = r->holders[0];
}

#define SG_N 25

/* 25 shared acquires of one loop turn go as two acquire_shared_many.lua
 * calls (16 + 9), each answered its own result: readers of ten names two
 * each, a semaphore (limit 2) asked three times, a mismatched limit, a name
 * held exclusive; then their releases as two release_many.lua calls. */
static void t_shared_groups(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    CHECK(wait_node(&f, true, 2000));
    run_for(&f, 50);
    CHECK_EQ_INT(acquire(&f, "sg-x", LEASE_A, 5000, "writer").code, LK_OK);
    static char names[SG_N][32], leases[SG_N][40];
    static struct sres x[SG_N];
    struct bk_req a[SG_N];
    for (int k = 0; k < SG_N; k++) {
        snprintf(leases[k], sizeof(leases[k]), "%032x", 0x5000 + k);
        a[k] = acquire_req(names[k], leases[k], 5000, "reader", false, false);
        if (k < 20) {
            snprintf(names[k], sizeof(names[k]), "sg-%d", k / 2);
            a[k].mode = BK_SHARED;
        } else if (k < 23) {
            snprintf(names[k], sizeof(names[k]), "sg-sem");
            a[k].limit = 2;
        } else if (k == 23) {
            snprintf(names[k], sizeof(names[k]), "sg-sem");
            a[k].limit = 3;
        } else {
            snprintf(names[k], sizeof(names[k]), "sg-x");
            a[k].mode = BK_SHARED;
        }
    }
    long long e0 = th_redis_calls(&R, "fcall"), v0 = th_redis_calls(&R, "function|load");
    for (int k = 0; k < SG_N; k++) {
        memset(&x[k], 0, sizeof(x[k]));
        CHECK_EQ_INT(submit(&f, &a[k], on_sdone, &x[k]), LK_AGAIN);
    }
    for (int k = 0; k < SG_N; k++) {
        CHECK(run_until(&f, &x[k].done, 5000));
        CHECK_EQ_INT(x[k].calls, 1);
    }
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") + th_redis_calls(&R, "function|load") - e0 - v0, 2);
    for (int k = 0; k < 20; k += 2) {
        CHECK_EQ_INT(x[k].code, LK_OK);
        CHECK_EQ_INT(x[k + 1].code, LK_OK);
        CHECK(x[k].token > 0 && x[k + 1].token > x[k].token); /* grant order per name */
    }
    CHECK_EQ_INT(x[20].code, LK_OK);
    CHECK_EQ_INT(x[21].code, LK_OK);
    CHECK(x[21].token > x[20].token);
    CHECK_EQ_INT(x[22].code, LK_LOCKED); /* the semaphore is full */
    CHECK_EQ_INT(x[22].nholders, 1);
    CHECK_EQ_INT(x[22].holder.fencing_token, x[20].token); /* expires first */
    CHECK_EQ_INT(x[23].code, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(x[23].limit, 2);
    CHECK_EQ_INT(x[24].code, LK_LOCKED);
    CHECK_EQ_INT(x[24].nholders, 1);
    CHECK_STR(x[24].holder.owner, "writer");
    CHECK_EQ_INT(x[24].holder.mode, BK_EXCLUSIVE);
    /* every reader holds: a writer is refused by the one that leaves last */
    struct sres w;
    memset(&w, 0, sizeof(w));
    struct bk_req wr = acquire_req("sg-3", LEASE_B, 5000, "w", false, false);
    CHECK_EQ_INT(submit(&f, &wr, on_sdone, &w), LK_AGAIN);
    CHECK(run_until(&f, &w.done, 5000));
    CHECK_EQ_INT(w.code, LK_LOCKED);
    CHECK_EQ_INT(w.holder.mode, BK_SHARED);
    CHECK_EQ_INT(w.holder.fencing_token, x[7].token);
    /* the releases of one turn: two calls, each its own token back */
    e0 = th_redis_calls(&R, "fcall");
    v0 = th_redis_calls(&R, "function|load");
    struct bk_req q[22];
    for (int k = 0; k < 22; k++) {
        q[k] = release_req(names[k], leases[k], 0);
    }
    static struct sres y[22];
    for (int k = 0; k < 22; k++) {
        memset(&y[k], 0, sizeof(y[k]));
        CHECK_EQ_INT(submit(&f, &q[k], on_sdone, &y[k]), LK_AGAIN);
    }
    for (int k = 0; k < 22; k++)
        CHECK(run_until(&f, &y[k].done, 5000));
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") + th_redis_calls(&R, "function|load") - e0 - v0, 2);
    for (int k = 0; k < 22; k++)
        CHECK_EQ_INT(y[k].code, LK_OK);
    /* every name is free again, and its keys are gone */
    for (int k = 0; k < 10; k++) {
        char n[32];
        snprintf(n, sizeof(n), "sg-%d", k);
        CHECK(!inspect(&f, n).held);
    }
    CHECK(!inspect(&f, "sg-sem").held);
    CHECK_EQ_INT(lock_keys("t:{sg-[0-9]}"), 0);
    CHECK_EQ_INT(lock_keys("t:{sg-[0-9]}:[zh]"), 0);
    CHECK_EQ_INT(lock_keys("t:{sg-sem}*[^e]"), 0); /* the fence counter stays */
    CHECK_EQ_INT(acquire(&f, "sg-3", LEASE_B, 5000, "w").code, LK_OK);
    CHECK_EQ_INT(release(&f, "sg-3", LEASE_B, 0).code, LK_OK);
    CHECK_EQ_INT(release(&f, "sg-x", LEASE_A, 0).code, LK_OK);
    fx_close(&f);
}

/* One request of any kind, answered through on_sdone (any mode). */
static struct sres sreq(struct fx *f, const struct bk_req *q)
{
    struct sres x;
    memset(&x, 0, sizeof(x));
    enum lk_code rc = submit(f, q, on_sdone, &x);
    if (rc != LK_OK)
        CHECK_EQ_INT(rc, LK_AGAIN);
    CHECK(run_until(f, &x.done, 5000));
    CHECK_EQ_INT(x.calls, 1);
    return x;
}

/* limit 1: a reader; more: a semaphore's slot; wait: a waiter asks */
static struct sres sacq(struct fx *f, const char *name, const char *lease, int64_t ttl_ms,
                        int64_t limit, bool wait)
{
    struct bk_req a = acquire_req(name, lease, ttl_ms, "o", false, wait);
    a.mode = limit == 1 ? BK_SHARED : BK_EXCLUSIVE;
    a.limit = limit;
    return sreq(f, &a);
}

static struct sres sop(struct fx *f, enum bk_op op, const char *name, const char *lease,
                       int64_t ttl_ms)
{
    struct bk_req q = {.op = op, .name = name, .lease = lease, .ttl_ms = ttl_ms};
    return sreq(f, &q);
}

#define LEASE_C "cccccccccccccccccccccccccccccccc"

/* One page of a listing, its first entries kept. */
struct lh_list {
    bool done;
    size_t n;
    struct bk_entry e[4];
};

static void on_lh_list(void *arg, const struct bk_res *r)
{
    struct lh_list *x = arg;
    x->n = r->nentries;
    for (size_t i = 0; i < r->nentries && i < 4; i++) {
        x->e[i] = r->entries[i];
        x->e[i].name = NULL; /* lives only during the callback */
    }
    x->done = true;
}

static struct lh_list lh_list(struct fx *f, const char *prefix)
{
    struct lh_list x;
    memset(&x, 0, sizeof(x));
    struct bk_req q = {.op = BK_LIST, .prefix = prefix, .cursor = "", .count = 10};
    enum lk_code rc = submit(f, &q, on_lh_list, &x);
    CHECK(rc == LK_AGAIN || rc == LK_OK);
    CHECK(run_until(f, &x.done, 5000));
    return x;
}

/* an exclusive acquire (its refusal may name a shared holder) */
static enum lk_code xacq(struct fx *f, const char *name, const char *lease, bool wait)
{
    struct bk_req a = acquire_req(name, lease, 5000, "w", false, wait);
    return sreq(f, &a).code;
}

/* A release's reply, with the acquire it carried (bk_res.handoff) kept. */
struct hres {
    bool done, has;
    int calls;
    enum lk_code code, hcode;
    int64_t token, htoken, hlimit;
    size_t hnholders;
};

static void on_hdone(void *arg, const struct bk_res *r)
{
    struct hres *x = arg;
    x->calls++;
    x->done = true;
    x->code = r->code;
    x->token = r->fencing_token;
    x->has = r->handoff != NULL;
    if (x->has) {
        x->hcode = r->handoff->code;
        x->htoken = r->handoff->fencing_token;
        x->hlimit = r->handoff->limit;
        x->hnholders = r->handoff->nholders;
    }
}

/* Releases lease of name handing it to a waiter (wlease, mode, limit) in
 * the same call; evals: the script calls it took. */
static struct hres handoff(struct fx *f, const char *name, const char *lease, int64_t delay_ms,
                           const char *wlease, enum bk_mode mode, int64_t limit, long long *evals)
{
    struct bk_handoff ho = {
        .lease = wlease, .owner = "w", .mode = mode, .limit = limit, .ttl_ms = 5000};
    struct bk_req q = release_req(name, lease, delay_ms);
    q.handoff = &ho;
    struct hres x;
    memset(&x, 0, sizeof(x));
    long long e0 = th_redis_calls(&R, "fcall");
    enum lk_code rc = submit(f, &q, on_hdone, &x);
    if (rc != LK_OK)
        CHECK_EQ_INT(rc, LK_AGAIN);
    CHECK(run_until(f, &x.done, 5000));
    CHECK_EQ_INT(x.calls, 1);
    *evals = th_redis_calls(&R, "fcall") - e0;
    return x;
}

/* A release that hands the name to a waiter (bk_req.handoff,
 * release_handoff.lua): one script call releases and grants, the waiter's
 * token above every one before; a waiter refused by the holders left, or by
 * the limit in force, gets the refusal an acquire would; a release that
 * did not release, or leaves a lock-delay, asks nothing for the waiter. */
static void t_release_handoff(void)
{
    struct fx f;
    long long ev;
    fx_open_on(&f, &R);
    CHECK(wait_node(&f, true, 2000));
    /* exclusive to exclusive */
    struct sres a = sreq(&f, &(struct bk_req){.op = BK_ACQUIRE,
                                              .name = "ho-x",
                                              .lease = LEASE_A,
                                              .owner = "",
                                              .limit = 1,
                                              .ttl_ms = 5000});
    CHECK_EQ_INT(a.code, LK_OK);
    struct hres h = handoff(&f, "ho-x", LEASE_A, 0, LEASE_B, BK_EXCLUSIVE, 1, &ev);
    CHECK_EQ_INT(ev, 1);
    CHECK_EQ_INT(h.code, LK_OK);
    CHECK_EQ_INT(h.token, a.token);
    CHECK(h.has);
    CHECK_EQ_INT(h.hcode, LK_OK);
    CHECK(h.htoken > a.token);
    struct sres i = sop(&f, BK_INSPECT, "ho-x", NULL, 0);
    CHECK_EQ_INT(i.nholders, 1);
    CHECK_EQ_INT(i.holder.fencing_token, h.htoken);
    /* not held (B holds it): nothing asked for the waiter */
    h = handoff(&f, "ho-x", LEASE_A, 0, LEASE_C, BK_EXCLUSIVE, 1, &ev);
    CHECK_EQ_INT(h.code, LK_HELD_BY_OTHER);
    CHECK(!h.has);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "ho-x", NULL, 0).holder.fencing_token, i.holder.fencing_token);
    /* a lock-delay: declined, the plain release */
    h = handoff(&f, "ho-x", LEASE_B, 300, LEASE_C, BK_EXCLUSIVE, 1, &ev);
    CHECK_EQ_INT(h.code, LK_OK);
    CHECK(!h.has);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "ho-x", NULL, 0).nholders, 0);
    /* a semaphore of 2, full: a slot's release hands it to the waiter */
    struct sres s1 = sacq(&f, "ho-s", LEASE_A, 5000, 2, false);
    struct sres s2 = sacq(&f, "ho-s", LEASE_B, 5000, 2, false);
    CHECK_EQ_INT(s1.code, LK_OK);
    CHECK_EQ_INT(s2.code, LK_OK);
    CHECK_EQ_INT(sacq(&f, "ho-s", LEASE_C, 5000, 2, true).code, LK_LOCKED);
    h = handoff(&f, "ho-s", LEASE_A, 0, LEASE_C, BK_EXCLUSIVE, 2, &ev);
    CHECK_EQ_INT(ev, 1);
    CHECK_EQ_INT(h.code, LK_OK);
    CHECK_EQ_INT(h.token, s1.token);
    CHECK(h.has);
    CHECK_EQ_INT(h.hcode, LK_OK);
    CHECK(h.htoken > s2.token);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "ho-s", NULL, 0).total, 2);
    /* another limit than the one in force: refused, the release stands */
    h = handoff(&f, "ho-s", LEASE_B, 0, LEASE_A, BK_EXCLUSIVE, 3, &ev);
    CHECK_EQ_INT(h.code, LK_OK);
    CHECK(h.has);
    CHECK_EQ_INT(h.hcode, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(h.hlimit, 2);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "ho-s", NULL, 0).total, 1);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "ho-s", LEASE_C, 0).code, LK_OK);
    /* readers: one leaves, a writer is refused by the other */
    CHECK_EQ_INT(sacq(&f, "ho-r", LEASE_A, 5000, 1, false).code, LK_OK);
    CHECK_EQ_INT(sacq(&f, "ho-r", LEASE_B, 5000, 1, false).code, LK_OK);
    h = handoff(&f, "ho-r", LEASE_A, 0, LEASE_C, BK_EXCLUSIVE, 1, &ev);
    CHECK_EQ_INT(h.code, LK_OK);
    CHECK(h.has);
    CHECK_EQ_INT(h.hcode, LK_LOCKED);
    CHECK_EQ_INT(h.hnholders, 1);
    /* the last reader's release hands it to the writer */
    h = handoff(&f, "ho-r", LEASE_B, 0, LEASE_C, BK_EXCLUSIVE, 1, &ev);
    CHECK_EQ_INT(h.code, LK_OK);
    CHECK(h.has);
    CHECK_EQ_INT(h.hcode, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "ho-r", LEASE_C, 0).code, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "ho-x", LEASE_C, 0).code, LK_NOT_HELD);
    fx_close(&f);
}

/* Submits a release of lease handing name to wlease (limit: 1 a mutex's
 * exclusive waiter, more a semaphore's), granted only if after ("" = none)
 * holds the name by then; answered into x, not waited for. */
static void handoff_start(struct fx *f, const char *name, const char *lease, const char *wlease,
                          const char *after, int64_t limit, struct bk_handoff *ho, struct hres *x)
{
    memset(ho, 0, sizeof(*ho));
    ho->lease = wlease;
    ho->owner = "w";
    ho->mode = BK_EXCLUSIVE;
    ho->limit = limit;
    ho->ttl_ms = 5000;
    snprintf(ho->after, sizeof(ho->after), "%s", after);
    struct bk_req q = release_req(name, lease, 0);
    q.handoff = ho;
    memset(x, 0, sizeof(*x));
    enum lk_code rc = submit(f, &q, on_hdone, x);
    if (rc != LK_OK)
        CHECK_EQ_INT(rc, LK_AGAIN);
}

static bool all_done(struct fx *f, struct hres *x, int n)
{
    for (int i = 0; i < n; i++)
        if (!run_until(f, &x[i].done, 5000) || x[i].calls != 1)
            return false;
    return true;
}

#define W1 "11111111111111111111111111111111"
#define W2 "22222222222222222222222222222222"
#define W3 "33333333333333333333333333333333"
#define W4 "44444444444444444444444444444444"
#define W5 "55555555555555555555555555555555"

/* The hand-offs of one loop turn go as one script call (release_handoff.lua
 * grouped, GQ_HANDOFF), in the order they were made, each waiter granted
 * only if the one queued before it (after) holds the name by then: 3 slots
 * of a semaphore of 4 released at once grant 3 waiters in 1 call, tokens
 * in queue order (before: 3 calls); a waiter behind one that never was
 * granted is not asked (its release stands); a refusal (another limit)
 * stops the waiter behind it in the same call; one granted by an earlier
 * call lets the next one in; a mutex's hand-offs on two names share a
 * call too. */
static void t_handoff_group(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    CHECK(wait_node(&f, true, 2000));
    const char *hl[4] = {LEASE_A, LEASE_B, LEASE_C, W5};
    int64_t top = 0;
    for (int i = 0; i < 4; i++) {
        struct sres a = sacq(&f, "hg", hl[i], 5000, 4, false);
        CHECK_EQ_INT(a.code, LK_OK);
        top = a.token;
    }
    struct bk_handoff ho[3];
    struct hres x[3];
    const char *w[3] = {W1, W2, W3};
    long long e0 = th_redis_calls(&R, "fcall");
    for (int i = 0; i < 3; i++)
        handoff_start(&f, "hg", hl[i], w[i], i > 0 ? w[i - 1] : "", 4, &ho[i], &x[i]);
    CHECK(all_done(&f, x, 3));
    printf("# 3 hand-offs of one turn: %lld script call(s)\n", th_redis_calls(&R, "fcall") - e0);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(x[i].code, LK_OK);
        CHECK(x[i].has);
        CHECK_EQ_INT(x[i].hcode, LK_OK);
        CHECK(x[i].htoken > (i > 0 ? x[i - 1].htoken : top)); /* queue order */
    }
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "hg", NULL, 0).total, 4);
    /* behind W4, never granted: W5's slot is released, W1 not asked */
    handoff_start(&f, "hg", W5, W1, W4, 4, &ho[0], &x[0]);
    CHECK(all_done(&f, x, 1));
    CHECK_EQ_INT(x[0].code, LK_OK);
    CHECK(!x[0].has);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "hg", NULL, 0).total, 3);
    /* one call: W4 refused (another limit), so W5 behind it is not asked;
     * both releases stand */
    e0 = th_redis_calls(&R, "fcall");
    handoff_start(&f, "hg", W1, W4, "", 5, &ho[0], &x[0]);
    handoff_start(&f, "hg", W2, W5, W4, 4, &ho[1], &x[1]);
    CHECK(all_done(&f, x, 2));
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 1);
    CHECK(x[0].has);
    CHECK_EQ_INT(x[0].hcode, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(x[1].code, LK_OK);
    CHECK(!x[1].has);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "hg", NULL, 0).total, 1); /* W3 */
    /* W3, granted by an earlier call, lets W1 in behind it */
    CHECK_EQ_INT(sacq(&f, "hg", LEASE_A, 5000, 4, false).code, LK_OK);
    handoff_start(&f, "hg", LEASE_A, W1, W3, 4, &ho[0], &x[0]);
    CHECK(all_done(&f, x, 1));
    CHECK(x[0].has);
    CHECK_EQ_INT(x[0].hcode, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "hg", NULL, 0).total, 2);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "hg", W1, 0).code, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "hg", W3, 0).code, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "hg", NULL, 0).total, 0);
    /* mutexes: two names handed on in one call */
    CHECK_EQ_INT(xacq(&f, "hx1", LEASE_A, false), LK_OK);
    CHECK_EQ_INT(xacq(&f, "hx2", LEASE_B, false), LK_OK);
    e0 = th_redis_calls(&R, "fcall");
    handoff_start(&f, "hx1", LEASE_A, W1, "", 1, &ho[0], &x[0]);
    handoff_start(&f, "hx2", LEASE_B, W2, "", 1, &ho[1], &x[1]);
    CHECK(all_done(&f, x, 2));
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 1);
    for (int i = 0; i < 2; i++) {
        CHECK(x[i].has);
        CHECK_EQ_INT(x[i].hcode, LK_OK);
    }
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "hx1", W1, 0).code, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "hx2", W2, 0).code, LK_OK);
    fx_close(&f);
}

/* A semaphore's release handing its slot on when the holders it leaves
 * are all expired and at least the limit (a set over its limit: only a
 * re-assertion after a restart makes one; made here by hand): the
 * release's trim (before it looks for its own slot, sh_release) empties
 * the set, so the release is the last holder's and drops the keys, and its
 * waiter is granted the name afresh, a lone holder in the value: no key of
 * the name is left without an expiry (a grant into an emptied set once
 * made ':z' and ':h' again with none). */
static void t_handoff_trims_to_empty(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    CHECK(wait_node(&f, true, 2000));
    CHECK_EQ_INT(sacq(&f, "hte", LEASE_A, 60000, 2, false).code, LK_OK);
    CHECK_EQ_INT(sacq(&f, "hte", LEASE_B, 200, 2, false).code, LK_OK);
    th_redis_cli(&R, "ZADD t:{hte}:z 1 " LEASE_C); /* expired, over the limit */
    th_redis_cli(&R, "HSET t:{hte}:h " LEASE_C " 1");
    CHECK_EQ_INT(atoll(th_redis_cli(&R, "ZCARD t:{hte}:z")), 3);
    th_sleep_ms(400); /* LEASE_B expires */
    struct bk_handoff ho;
    struct hres x;
    handoff_start(&f, "hte", LEASE_A, W1, "", 2, &ho, &x);
    CHECK(all_done(&f, &x, 1));
    CHECK_EQ_INT(x.code, LK_OK);
    CHECK(x.has);
    CHECK_EQ_INT(x.hcode, LK_OK);
    long long vt = atoll(th_redis_cli(&R, "PTTL t:{hte}"));
    long long zt = atoll(th_redis_cli(&R, "PTTL t:{hte}:z"));
    long long ht = atoll(th_redis_cli(&R, "PTTL t:{hte}:h"));
    printf("# after the set was emptied: PTTL value %lld, :z %lld, :h %lld\n", vt, zt, ht);
    CHECK(vt > 0);
    CHECK(zt > 0 || zt == -2); /* absent (-2) or expiring, never -1 */
    CHECK(ht > 0 || ht == -2);
    CHECK_EQ_INT(th_redis_cli(&R, "GET t:{hte}")[0], 't'); /* W1 alone, in the value */
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "hte", NULL, 0).total, 1);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "hte", W1, 0).code, LK_OK);
    CHECK_EQ_INT(atoll(th_redis_cli(&R, "EXISTS t:{hte} t:{hte}:z t:{hte}:h")), 0);
    fx_close(&f);
}

/* A name's lone shared holder or semaphore slot lives in the lock's value
 * ('t', _shared.lua): no sorted set or hash until a second holder joins and
 * spills it there; every operation meets both forms. */
static void t_lone_holder(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    CHECK(wait_node(&f, true, 2000));
    /* a lone reader: the commands of an exclusive pair, no set */
    long long z0 = th_redis_calls(&R, "zadd"), h0 = th_redis_calls(&R, "hset");
    struct sres a = sacq(&f, "lh", LEASE_A, 5000, 1, false);
    CHECK_EQ_INT(a.code, LK_OK);
    CHECK_EQ_INT(lock_keys("t:{lh}:[zh]"), 0);
    struct sres i = sop(&f, BK_INSPECT, "lh", NULL, 0);
    CHECK_EQ_INT(i.total, 1);
    CHECK_EQ_INT(i.holder.mode, BK_SHARED);
    CHECK_EQ_INT(i.holder.fencing_token, a.token);
    CHECK(i.holder.expires_in_ms > 4000);
    int64_t ix = i.index;
    struct lh_list ls = lh_list(&f, "lh");
    CHECK_EQ_INT(ls.n, 1);
    CHECK_EQ_INT(ls.e[0].nholders, 1);
    CHECK_EQ_INT(ls.e[0].limit, 1);
    CHECK_EQ_INT(ls.e[0].holder.mode, BK_SHARED);
    CHECK_EQ_INT(ls.e[0].holder.fencing_token, a.token);
    CHECK_EQ_INT(ls.e[0].index, ix);
    struct sres r = sop(&f, BK_RENEW, "lh", LEASE_A, 7000);
    CHECK_EQ_INT(r.code, LK_OK);
    CHECK_EQ_INT(r.token, a.token);
    CHECK_EQ_INT(sop(&f, BK_RENEW, "lh", LEASE_B, 7000).code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh", LEASE_A "a", 0).code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(sop(&f, BK_INSPECT, "lh", NULL, 0).index, ix); /* a renewal is no change */
    CHECK(sop(&f, BK_INSPECT, "lh", NULL, 0).holder.expires_in_ms > 6000);
    CHECK_EQ_INT(xacq(&f, "lh", LEASE_B, false), LK_LOCKED);
    r = sop(&f, BK_RELEASE, "lh", LEASE_A, 0);
    CHECK_EQ_INT(r.code, LK_OK);
    CHECK_EQ_INT(r.token, a.token);
    CHECK(sop(&f, BK_INSPECT, "lh", NULL, 0).index > ix); /* a release is */
    CHECK_EQ_INT(th_redis_calls(&R, "zadd") - z0, 0);
    CHECK_EQ_INT(th_redis_calls(&R, "hset") - h0, 0);
    CHECK_EQ_INT(lock_keys("t:{lh}"), 0);

    /* a second reader spills the first into the set; both hold, tokens in
     * grant order; the first's expiry frees its place while the other holds */
    a = sacq(&f, "lh", LEASE_A, 300, 1, false);
    CHECK_EQ_INT(a.code, LK_OK);
    ix = sop(&f, BK_INSPECT, "lh", NULL, 0).index;
    long long p0 = th_redis_calls(&R, "pttl"), e0 = th_redis_calls(&R, "pexpire");
    struct sres b = sacq(&f, "lh", LEASE_B, 5000, 1, false);
    CHECK_EQ_INT(b.code, LK_OK);
    CHECK(b.token > a.token);
    CHECK_EQ_INT(lock_keys("t:{lh}:[zh]"), 2);
    /* the spill gave the three keys B's life at once (sh_spill: 2 x its
     * ttl, as sh_extend would): one PTTL (the value's) and two PEXPIREs */
    CHECK_EQ_INT(th_redis_calls(&R, "pttl") - p0, 1);
    CHECK_EQ_INT(th_redis_calls(&R, "pexpire") - e0, 2);
    CHECK(atoll(th_redis_cli(&R, "PTTL t:{lh}")) > 5000);
    CHECK(atoll(th_redis_cli(&R, "PTTL t:{lh}:z")) > 5000);
    CHECK(atoll(th_redis_cli(&R, "PTTL t:{lh}:h")) > 5000);
    i = sop(&f, BK_INSPECT, "lh", NULL, 0);
    CHECK(i.index > ix);
    CHECK_EQ_INT(i.total, 2);
    CHECK_EQ_INT(i.holder.fencing_token, b.token); /* newest first */
    struct sres w = sacq(&f, "lh", LEASE_C, 5000, 1, false);
    CHECK_EQ_INT(xacq(&f, "lh", LEASE_C, false), LK_LOCKED);
    CHECK_EQ_INT(w.code, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh", LEASE_C, 0).code, LK_OK);
    th_sleep_ms(450);
    i = sop(&f, BK_INSPECT, "lh", NULL, 0);
    CHECK_EQ_INT(i.total, 1);
    CHECK_EQ_INT(i.holder.fencing_token, b.token);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh", LEASE_A, 0).code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(sop(&f, BK_RENEW, "lh", LEASE_B, 6000).code, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh", LEASE_B, 0).code, LK_OK);
    CHECK_EQ_INT(lock_keys("t:{lh}*[^e]"), 0); /* the fence counter stays */

    /* a lone reader expires by itself; a writer then takes the name */
    CHECK_EQ_INT(sacq(&f, "lh", LEASE_A, 300, 1, false).code, LK_OK);
    th_sleep_ms(400);
    CHECK_EQ_INT(xacq(&f, "lh", LEASE_B, false), LK_OK);
    CHECK_EQ_INT(sacq(&f, "lh", LEASE_C, 5000, 1, false).code, LK_LOCKED);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh", LEASE_B, 0).code, LK_OK);

    /* a writer that waits for a lone reader queues the readers behind it
     * (it spills the reader to mark itself), and gets the name after it */
    CHECK_EQ_INT(sacq(&f, "lh", LEASE_A, 5000, 1, false).code, LK_OK);
    CHECK_EQ_INT(xacq(&f, "lh", LEASE_B, true), LK_LOCKED);
    CHECK_EQ_INT(sacq(&f, "lh", LEASE_C, 5000, 1, false).code, LK_LOCKED);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh", LEASE_A, 0).code, LK_OK);
    CHECK(sacq(&f, "lh", LEASE_C, 5000, 1, false).code != LK_OK); /* kept for the writer */
    CHECK_EQ_INT(xacq(&f, "lh", LEASE_B, false), LK_OK);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh", LEASE_B, 0).code, LK_OK);

    /* a semaphore (limit 2): a lone slot, then full; the first slot's
     * expiry frees it though it was spilled (no permit leaks); another
     * limit is refused by the lone slot as by the set */
    a = sacq(&f, "lh-sem", LEASE_A, 300, 2, false);
    CHECK_EQ_INT(a.code, LK_OK);
    ls = lh_list(&f, "lh-sem");
    CHECK_EQ_INT(ls.n, 1);
    CHECK_EQ_INT(ls.e[0].nholders, 1);
    CHECK_EQ_INT(ls.e[0].limit, 2);
    CHECK_EQ_INT(ls.e[0].holder.fencing_token, a.token);
    struct sres m = sacq(&f, "lh-sem", LEASE_B, 5000, 3, false);
    CHECK_EQ_INT(m.code, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(m.limit, 2);
    CHECK_EQ_INT(xacq(&f, "lh-sem", LEASE_B, false), LK_LIMIT_MISMATCH);
    b = sacq(&f, "lh-sem", LEASE_B, 5000, 2, false);
    CHECK_EQ_INT(b.code, LK_OK);
    CHECK(b.token > a.token);
    struct sres c = sacq(&f, "lh-sem", LEASE_C, 5000, 2, false);
    CHECK_EQ_INT(c.code, LK_LOCKED);
    CHECK_EQ_INT(c.holder.fencing_token, a.token); /* it frees first */
    th_sleep_ms(400);
    c = sacq(&f, "lh-sem", LEASE_C, 5000, 2, false);
    CHECK_EQ_INT(c.code, LK_OK);
    CHECK(c.token > b.token);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh-sem", LEASE_B, 0).code, LK_OK);
    CHECK_EQ_INT(sop(&f, BK_RELEASE, "lh-sem", LEASE_C, 0).code, LK_OK);
    CHECK_EQ_INT(lock_keys("t:{lh-sem}*[^e]"), 0);
    fx_close(&f);
}

static void t_noscript_fallback(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    /* connected first: its startup check (reassert.lua, issue 25) is done */
    CHECK_EQ_INT(inspect(&f, "ns").code, LK_OK);
    /* Redis lost lockd's functions (FUNCTION FLUSH; a restart without
     * persistence alike): the FCALL fails, lockd loads the library and
     * calls again, once */
    th_redis_cli(&R, "FUNCTION FLUSH");
    long long v0 = th_redis_calls(&R, "function|load");
    long long e0 = th_redis_calls(&R, "fcall");
    CHECK_EQ_INT(acquire(&f, "ns", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(th_redis_calls(&R, "function|load") - v0, 1);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 2);
    e0 = th_redis_calls(&R, "fcall");
    CHECK_EQ_INT(acquire(&f, "ns2", LEASE_A, 5000, "").code, LK_OK); /* loaded again */
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 1);
    CHECK_EQ_INT(th_redis_calls(&R, "function|load") - v0, 1);
    /* each other script falls back once too, and answers right */
    CHECK_EQ_INT(release(&f, "ns", LEASE_A, 0).code, LK_OK);
    CHECK_EQ_INT(release(&f, "ns", LEASE_A, 0).code, LK_NOT_HELD);
    CHECK_EQ_INT(th_redis_calls(&R, "function|load") - v0, 2);
    /* a library Redis will not load (a user without +function): the call
     * fails once more and is answered so, not sent again and again, and
     * grants nothing */
    th_redis_cli(&R, "FUNCTION FLUSH");
    th_redis_cli(&R, "ACL SETUSER default -function");
    e0 = th_redis_calls(&R, "fcall");
    CHECK_EQ_INT(acquire(&f, "ns3", LEASE_A, 5000, "").code, LK_BACKEND_DOWN);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 2);
    th_redis_cli(&R, "ACL SETUSER default +@all");
    CHECK_EQ_INT(lock_keys("t:{ns3}"), 0);
    CHECK_EQ_INT(acquire(&f, "ns3", LEASE_A, 5000, "").code, LK_OK);
    fx_close(&f);
}

static void t_lock_delay(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    CHECK_EQ_INT(acquire(&f, "ld", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(release(&f, "ld", LEASE_A, 500).code, LK_OK);
    struct reply b = acquire(&f, "ld", LEASE_B, 5000, "");
    CHECK_EQ_INT(b.code, LK_LOCKED);
    CHECK_EQ_INT(b.nholders, 0); /* nobody holds it: a lock-delay runs */
    CHECK(b.delay_ms > 0 && b.delay_ms <= 500);
    struct reply i = inspect(&f, "ld");
    CHECK(!i.held);
    CHECK(i.delay_ms > 0 && i.delay_ms <= 500);
    th_sleep_ms(550);
    CHECK_EQ_INT(acquire(&f, "ld", LEASE_B, 5000, "").code, LK_OK);
    /* a clean release (delay 0) leaves no delay */
    CHECK_EQ_INT(release(&f, "ld", LEASE_B, 0).code, LK_OK);
    CHECK_EQ_INT(acquire(&f, "ld", LEASE_A, 5000, "").code, LK_OK);
    fx_close(&f);
}

static void t_fencing_across_data_loss(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    int64_t last = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 5; i++) {
            struct reply a = acquire(&f, "fence", LEASE_A, 5000, "");
            CHECK_EQ_INT(a.code, LK_OK);
            CHECK(a.fencing_token > last);
            last = a.fencing_token;
            CHECK_EQ_INT(release(&f, "fence", LEASE_A, 0).code, LK_OK);
        }
        th_redis_cli(&R, "FLUSHALL"); /* a non-persistent Redis restarting loses the counter */
    }
    CHECK(last < (1LL << 53));
    /* A counter ahead of this lockd's clock (another lockd's clock runs
     * ahead): the next tokens count on from it, and it keeps its ttl of
     * fence_retention_ms (24 h by default). */
    long long ahead = (long long)lk_wall_us() + 1000000000000LL;
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "SET t:{fence}:fence %lld", ahead);
    th_redis_cli(&R, cmd);
    for (int i = 1; i <= 2; i++) {
        struct reply a = acquire(&f, "fence", LEASE_A, 5000, "");
        CHECK_EQ_INT(a.code, LK_OK);
        CHECK_EQ_INT(a.fencing_token, ahead + i);
        /* the lock was taken under this lockd's clock and its value then
         * rewritten with the counter's token, keeping the lease's ttl */
        struct reply in = inspect(&f, "fence");
        CHECK(in.held);
        CHECK_EQ_INT(in.holder.fencing_token, ahead + i);
        CHECK(in.holder.expires_in_ms > 4000 && in.holder.expires_in_ms <= 5000);
        CHECK_EQ_INT(release(&f, "fence", LEASE_A, 0).code, LK_OK);
    }
    long long keep = atoll(th_redis_cli(&R, "PTTL t:{fence}:fence"));
    CHECK(keep > 86300000LL && keep <= 86400000LL);
    /* a refused attempt leaves the counter as it was */
    CHECK_EQ_INT(acquire(&f, "fence", LEASE_A, 5000, "").code, LK_OK);
    char before[64];
    snprintf(before, sizeof(before), "%s", th_redis_cli(&R, "GET t:{fence}:fence"));
    CHECK_EQ_INT(acquire(&f, "fence", LEASE_B, 5000, "").code, LK_LOCKED);
    CHECK_STR(th_redis_cli(&R, "GET t:{fence}:fence"), before);
    CHECK_EQ_INT(release(&f, "fence", LEASE_A, 0).code, LK_OK);
    fx_close(&f);
}

struct batch_res {
    bool done;
    int calls;
    size_t n;
    const struct bk_renew_item *items;
    enum lk_code code;
};

static void on_batch(void *arg, const struct bk_res *r)
{
    struct batch_res *x = arg;
    x->calls++;
    x->n = r->nitems;
    x->items = r->items;
    x->code = r->code;
    x->done = true;
}

struct many {
    int pending;
    int ok;
};

static void on_many(void *arg, const struct bk_res *r)
{
    struct many *m = arg;
    m->pending--;
    if (r->code == LK_OK)
        m->ok++;
}

static void t_renew_many(void)
{
    enum { N = 10000 };
    struct fx f;
    next_timeout = "3000"; /* 10,000 renewals on a loaded test machine */
    fx_open_on(&f, &R);
    next_timeout = "500";
    CHECK(wait_node(&f, true, 2000));
    static char names[N][24];
    static struct bk_renew_item items[N];
    struct many m = {0, 0};
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "many-%d", i);
        struct bk_req a = acquire_req(names[i], LEASE_A, 5000, "", true, false);
        m.pending++;
        /* pipelined on one connection, 500 in flight at a time so that the
         * burst stays inside the 500 ms deadline even under ASan */
        enum lk_code rc = submit(&f, &a, on_many, &m);
        CHECK(rc == LK_AGAIN || rc == LK_OK);
        int64_t end = th_now_ms() + 5000;
        while ((i % 500 == 499 || i == N - 1) && m.pending > 0 && th_now_ms() < end)
            run_for(&f, 5);
    }
    CHECK_EQ_INT(m.pending, 0);
    CHECK_EQ_INT(m.ok, N);
    for (int i = 0; i < N; i++) {
        items[i].name = names[i];
        items[i].lease = i % 1000 == 7 ? LEASE_B : LEASE_A; /* some are not ours */
        items[i].ttl_ms = i % 2 ? 20000 : 0;
        items[i].result = LK_INTERNAL;
    }
    items[N - 1].name = "many-never-acquired";
    long long e0 = th_redis_calls(&R, "fcall"), t0 = redis_total(&R);
    struct batch_res x = {false, 0, 0, NULL, LK_INTERNAL};
    struct bk_req q = {.op = BK_RENEW_MANY, .items = items, .nitems = N};
    enum lk_code rc = submit(&f, &q, on_batch, &x);
    CHECK_EQ_INT(rc, LK_AGAIN);
    CHECK(run_until(&f, &x.done, 10000));
    CHECK_EQ_INT(x.calls, 1);
    CHECK_EQ_INT(x.n, N);
    CHECK(x.items == items); /* the request's items, results filled */
    CHECK_EQ_INT(x.code, LK_OK);
    long long cmds = redis_total(&R) - t0 - 1;
    printf("# renew_many of %d leases: %lld redis commands (%lld FCALL)\n", N, cmds,
           th_redis_calls(&R, "fcall") - e0);
    CHECK(cmds < 200);
    for (int i = 0; i < N; i++) {
        enum lk_code want = i == N - 1 ? LK_NOT_HELD : i % 1000 == 7 ? LK_HELD_BY_OTHER : LK_OK;
        CHECK_EQ_INT(items[i].result, want);
    }
    CHECK(inspect(&f, "many-1").holder.expires_in_ms > 15000);
    CHECK(inspect(&f, "many-2").holder.expires_in_ms <= 5000);
    /* an empty batch answers at once */
    x.done = false;
    x.calls = 0;
    q.nitems = 0;
    CHECK_EQ_INT(submit(&f, &q, on_batch, &x), LK_OK);
    CHECK_EQ_INT(x.calls, 1);
    CHECK_EQ_INT(x.n, 0);
    fx_close(&f);
}

struct list_res {
    bool done;
    int found;
    char cursor[64];
    bool end;
    enum lk_code code;
};

static void on_list(void *arg, const struct bk_res *r)
{
    struct list_res *x = arg;
    const struct bk_entry *e = r->entries;
    size_t n = r->nentries;
    const char *next = r->next_cursor;
    x->code = r->code;
    for (size_t i = 0; i < n; i++) {
        CHECK(strncmp(e[i].name, "ls-", 3) == 0);
        CHECK_STR(e[i].holder.owner, "lister");
        CHECK(e[i].holder.fencing_token > 0);
        x->found++;
    }
    x->end = next == NULL;
    snprintf(x->cursor, sizeof(x->cursor), "%s", next ? next : "");
    x->done = true;
}

static void t_list(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    char name[32];
    for (int i = 0; i < 25; i++) {
        snprintf(name, sizeof(name), "ls-%d", i);
        CHECK_EQ_INT(acquire(&f, name, LEASE_A, 5000, "lister").code, LK_OK);
    }
    CHECK_EQ_INT(acquire(&f, "lsx", LEASE_A, 5000, "other").code, LK_OK);
    CHECK_EQ_INT(release(&f, "ls-0", LEASE_A, 1000).code, LK_OK); /* delayed: not held */
    struct list_res x;
    memset(&x, 0, sizeof(x));
    int pages = 0;
    do {
        x.done = false;
        struct bk_req q = {.op = BK_LIST, .prefix = "ls-", .cursor = x.cursor, .count = 10};
        enum lk_code rc = submit(&f, &q, on_list, &x);
        CHECK(rc == LK_AGAIN || rc == LK_OK);
        CHECK(run_until(&f, &x.done, 5000));
        CHECK_EQ_INT(x.code, LK_OK);
        pages++;
    } while (!x.end && pages < 1000);
    CHECK_EQ_INT(x.found, 24);
    x.done = false;
    struct bk_req bad = {.op = BK_LIST, .prefix = "ls-", .cursor = "not-a-cursor", .count = 10};
    CHECK_EQ_INT(submit(&f, &bad, on_list, &x), LK_OK);
    CHECK_EQ_INT(x.code, LK_BAD_CURSOR);
    fx_close(&f);
}

/* ---- pub/sub ---- */

static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static char hook_last[LK_NAME_MAX + 1];
static int hook_count;
static enum bk_news hook_what; /* the last message's news, and its ttl */
static int64_t hook_ttl;

static void on_release_hook(void *arg, const char *name, enum bk_news what, int64_t ttl_ms)
{
    (void)arg;
    pthread_mutex_lock(&hook_mu);
    snprintf(hook_last, sizeof(hook_last), "%s", name);
    hook_count++;
    hook_what = what;
    hook_ttl = ttl_ms;
    pthread_mutex_unlock(&hook_mu);
}

static bool hook_saw(void *arg)
{
    pthread_mutex_lock(&hook_mu);
    bool yes = strcmp(hook_last, (const char *)arg) == 0;
    pthread_mutex_unlock(&hook_mu);
    return yes;
}

static bool subscribed(void *arg)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "PUBSUB NUMSUB t:released:{%s}", (const char *)arg);
    const char *out = th_redis_cli(&R, cmd);
    const char *nl = strchr(out, '\n');
    return nl != NULL && atoi(nl + 1) >= 1;
}

static bool unsubscribed(void *arg)
{
    return !subscribed(arg);
}

/* Opens f and g on the same Redis (g plays a second lockd process); f
 * hears releases of name through its hook, from now on. */
static void open_watching(struct fx *f, struct fx *g, const char *name)
{
    fx_open_on(f, &R);
    fx_open_on(g, &R);
    f->be.ops->set_release_hook(f->be.state, on_release_hook, NULL);
    f->be.ops->watch(f->be.state, name, true);
    CHECK(th_wait_for(subscribed, (void *)name, 3000));
    pthread_mutex_lock(&hook_mu);
    hook_last[0] = '\0';
    pthread_mutex_unlock(&hook_mu);
}

/* The news of the hook's last message, once it named name. */
static bool hook_news(const char *name, enum bk_news *what, int64_t *ttl)
{
    if (!th_wait_for(hook_saw, (void *)name, 1000 * th_time_scale()))
        return false;
    pthread_mutex_lock(&hook_mu);
    *what = hook_what;
    *ttl = hook_ttl;
    hook_last[0] = '\0';
    pthread_mutex_unlock(&hook_mu);
    return true;
}

/* A renewal that shortens a lease tells other lockd processes the new ttl
 * ('r<ttl_ms>', _shared.lua sh_shortened), in each of its forms (an
 * exclusive holder, a lone reader, a reader in the set); a longer one says
 * nothing. What the hook makes of each message: 'g' a grant, 'r<digits>'
 * a shorter lease, anything else (a malformed 'r' too) a release. */
static void t_pubsub_shorter(void)
{
    struct fx f, g;
    open_watching(&f, &g, "psr");
    enum bk_news what;
    int64_t ttl;
    long long p0 = th_redis_calls(&R, "publish");
    CHECK_EQ_INT(acquire(&g, "psr", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(renew(&g, "psr", LEASE_A, 6000).code, LK_OK);
    CHECK_EQ_INT(th_redis_calls(&R, "publish") - p0, 0);
    CHECK_EQ_INT(renew(&g, "psr", LEASE_A, 250).code, LK_OK);
    CHECK(hook_news("psr", &what, &ttl));
    CHECK_EQ_INT(what, BK_NEWS_SHORTER);
    CHECK_EQ_INT(ttl, 250);
    CHECK_EQ_INT(release(&g, "psr", LEASE_A, 0).code, LK_OK);
    for (int readers = 1; readers <= 2; readers++) {
        const char *leases[2] = {LEASE_A, LEASE_B};
        for (int i = 0; i < readers; i++)
            CHECK_EQ_INT(sacq(&g, "psr", leases[i], 5000, 1, false).code, LK_OK);
        p0 = th_redis_calls(&R, "publish");
        CHECK_EQ_INT(sop(&g, BK_RENEW, "psr", leases[0], 7000).code, LK_OK);
        CHECK_EQ_INT(th_redis_calls(&R, "publish") - p0, 0);
        CHECK_EQ_INT(sop(&g, BK_RENEW, "psr", leases[0], 400 + readers).code, LK_OK);
        CHECK(hook_news("psr", &what, &ttl));
        CHECK_EQ_INT(what, BK_NEWS_SHORTER);
        CHECK_EQ_INT(ttl, 400 + readers);
        for (int i = 0; i < readers; i++)
            CHECK_EQ_INT(sop(&g, BK_RELEASE, "psr", leases[i], 0).code, LK_OK);
        hook_news("psr", &what, &ttl); /* (the last release's, if it published) */
    }
    const char *msgs[] = {"g", "r120", "r12x", "r", "0123abcd"};
    const enum bk_news news[] = {BK_NEWS_GRANTED, BK_NEWS_SHORTER, BK_NEWS_RELEASED,
                                 BK_NEWS_RELEASED, BK_NEWS_RELEASED};
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
        char cmd[96];
        snprintf(cmd, sizeof(cmd), "PUBLISH t:released:{psr} %s", msgs[i]);
        th_redis_cli(&R, cmd);
        CHECK(hook_news("psr", &what, &ttl));
        CHECK_EQ_INT(what, news[i]);
        CHECK_EQ_INT(ttl, news[i] == BK_NEWS_SHORTER ? 120 : 0);
    }
    fx_close(&g);
    fx_close(&f);
}

static void t_pubsub(void)
{
    struct fx f, g;
    open_watching(&f, &g, "ps");
    /* A release publishes only when a waiting caller was refused by that
     * holder: not after a try-once refusal, nor when nobody asked at all. */
    long long p0 = th_redis_calls(&R, "publish"), s0 = th_redis_calls(&R, "setrange");
    CHECK_EQ_INT(acquire(&g, "ps", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(acquire_as(&f, "ps", LEASE_B, 5000, "", false).code, LK_LOCKED);
    CHECK_EQ_INT(release(&g, "ps", LEASE_A, 0).code, LK_OK);
    CHECK_EQ_INT(th_redis_calls(&R, "publish") - p0, 0);
    CHECK_EQ_INT(acquire(&g, "ps", LEASE_A, 5000, "").code, LK_OK);
    /* a waiter's refusal marks the holder, once; a renewal keeps the mark */
    for (int k = 0; k < 2; k++)
        CHECK_EQ_INT(acquire_as(&f, "ps", LEASE_B, 5000, "", true).code, LK_LOCKED);
    CHECK_EQ_INT(renew(&g, "ps", LEASE_A, 6000).code, LK_OK);
    CHECK_EQ_INT(th_redis_calls(&R, "setrange") - s0, 1);
    CHECK_EQ_INT(release(&g, "ps", LEASE_A, 0).code, LK_OK);
    CHECK_EQ_INT(th_redis_calls(&R, "publish") - p0, 1);
    CHECK(th_wait_for(hook_saw, (void *)"ps", 1000));
    /* the next holder starts unmarked, unless it is a waiter (lockd queues
     * the waiters behind it without asking Redis) */
    CHECK_EQ_INT(acquire(&g, "ps", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(release(&g, "ps", LEASE_A, 0).code, LK_OK);
    CHECK_EQ_INT(th_redis_calls(&R, "publish") - p0, 1);
    CHECK_EQ_INT(acquire_as(&g, "ps", LEASE_A, 5000, "", true).code, LK_OK);
    CHECK_EQ_INT(release(&g, "ps", LEASE_A, 0).code, LK_OK);
    CHECK_EQ_INT(th_redis_calls(&R, "publish") - p0, 2);
    /* after a subscriber reconnect, watched names are subscribed again */
    th_redis_cli(&R, "CLIENT KILL TYPE pubsub");
    CHECK(th_wait_for(subscribed, (void *)"ps", 3000));
    pthread_mutex_lock(&hook_mu);
    hook_last[0] = '\0';
    pthread_mutex_unlock(&hook_mu);
    CHECK_EQ_INT(acquire(&g, "ps", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(acquire_as(&f, "ps", LEASE_B, 5000, "", true).code, LK_LOCKED);
    CHECK_EQ_INT(release(&g, "ps", LEASE_A, 0).code, LK_OK);
    CHECK(th_wait_for(hook_saw, (void *)"ps", 1000));
    f.be.ops->watch(f.be.state, "ps", false);
    CHECK(th_wait_for(unsubscribed, (void *)"ps", 3000));
    fx_close(&g);
    fx_close(&f);
}

/* Grouped releases take the lease alone per lock: release_many.lua builds
 * each lock's channel from its key and the prefix length, and a release that
 * leaves a lock-delay is sent on its own (release.lua with its delay). */
static void t_group_release_paths(void)
{
    struct fx f, g;
    open_watching(&f, &g, "gpub");
    static struct gop ops[3];
    /* a waiter's refusal marks gpub; g releases it in a group of three, one
     * call, and f's subscriber hears it on the lock's own channel */
    CHECK_EQ_INT(acquire(&g, "gpub", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(acquire(&g, "gpub-2", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(acquire(&g, "gpub-3", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(acquire_as(&f, "gpub", LEASE_B, 5000, "", true).code, LK_LOCKED);
    gop_set(&ops[0], "gpub-2", LEASE_A, 0);
    gop_set(&ops[1], "gpub", LEASE_A, 0);
    gop_set(&ops[2], "gpub-3", LEASE_A, 0);
    long long e0 = th_redis_calls(&R, "fcall"), p0 = th_redis_calls(&R, "publish");
    group_submit(&g, ops, 3, true);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 1);
    for (int k = 0; k < 3; k++) {
        CHECK_EQ_INT(ops[k].x.r.code, LK_OK);
        CHECK(!inspect(&g, ops[k].name).held);
    }
    CHECK_EQ_INT(th_redis_calls(&R, "publish") - p0, 1); /* gpub alone was marked */
    CHECK(th_wait_for(hook_saw, (void *)"gpub", 1000));
    /* three releases in one turn, the middle one leaving a lock-delay: the
     * other two share a call, the delayed one goes alone and keeps its delay */
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof(name), "gdel-%d", k);
        CHECK_EQ_INT(acquire(&g, name, LEASE_A, 5000, "").code, LK_OK);
        gop_set(&ops[k], name, LEASE_A, k == 1 ? 3000 : 0);
    }
    e0 = th_redis_calls(&R, "fcall");
    group_submit(&g, ops, 3, true);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 2);
    for (int k = 0; k < 3; k++) {
        CHECK_EQ_INT(ops[k].x.r.code, LK_OK);
        struct reply i = inspect(&g, ops[k].name);
        CHECK(!i.held);
        CHECK_EQ_INT(i.delay_ms > 0, k == 1);
    }
    CHECK_EQ_INT(acquire(&f, "gdel-1", LEASE_B, 5000, "").code, LK_LOCKED);
    CHECK_EQ_INT(acquire(&f, "gdel-0", LEASE_B, 5000, "").code, LK_OK);
    f.be.ops->watch(f.be.state, "gpub", false);
    fx_close(&g);
    fx_close(&f);
}

/* ---- faults ---- */

/* Tries to acquire name (LEASE_A, 5 s) every 20 ms of the loop until it is
 * granted or timeout_ms passed, as Redis comes back; returns the last
 * answer's code. */
static enum lk_code acquire_again(struct fx *f, const char *name, int64_t timeout_ms)
{
    int64_t t0 = th_now_ms();
    enum lk_code code = LK_BACKEND_DOWN;
    while (code != LK_OK && th_now_ms() - t0 < timeout_ms) {
        code = acquire(f, name, LEASE_A, 5000, "").code;
        if (code != LK_OK)
            run_for(f, 20);
    }
    return code;
}

static void t_redis_killed_and_restarted(void)
{
    struct th_redis r;
    th_redis_start(&r, 0, NULL);
    struct fx f;
    fx_open_on(&f, &r);
    CHECK_EQ_INT(acquire(&f, "kill", LEASE_A, 60000, "").code, LK_OK);
    th_redis_stop(&r);
    int64_t t0 = th_now_ms();
    for (int i = 0; i < 5; i++) {
        struct reply b = acquire(&f, "kill2", LEASE_B, 5000, "");
        CHECK_EQ_INT(b.code, LK_BACKEND_DOWN); /* never LK_OK while it is down */
        CHECK_EQ_INT(renew(&f, "kill", LEASE_A, 5000).code, LK_BACKEND_DOWN);
        CHECK_EQ_INT(inspect(&f, "kill").code, LK_BACKEND_DOWN);
    }
    CHECK(th_now_ms() - t0 < 5 * TIMEOUT_MS);
    CHECK(wait_node(&f, false, 2000));
    struct bk_node n;
    f.be.ops->nodes(f.be.state, &n, 1);
    printf("# down reason: %s\n", n.reason);
    CHECK(n.reason[0] != '\0');
    th_redis_start(&r, r.port, NULL); /* same port, empty data */
    int64_t t1 = th_now_ms();
    CHECK_EQ_INT(acquire_again(&f, "kill3", 5000), LK_OK);
    printf("# acquire works again %lld ms after restart\n", (long long)(th_now_ms() - t1));
    CHECK(wait_node(&f, true, 2000));
    fx_close(&f);
    th_redis_stop(&r);
}

static void t_redis_hung(void)
{
    struct th_redis r;
    th_redis_start(&r, 0, NULL);
    struct fx f;
    fx_open_on(&f, &r);
    CHECK_EQ_INT(acquire(&f, "hung", LEASE_A, 5000, "").code, LK_OK);
    kill(r.pid, SIGSTOP); /* accepts nothing, answers nothing */
    struct res x;
    memset(&x, 0, sizeof(x));
    struct bk_req a = acquire_req("hung2", LEASE_B, 5000, "", false, false);
    int64_t t0 = th_now_ms();
    CHECK_EQ_INT(submit(&f, &a, on_done, &x), LK_AGAIN);
    CHECK(run_until(&f, &x.done, 5000));
    int64_t took = th_now_ms() - t0;
    CHECK_EQ_INT(x.r.code, LK_BACKEND_DOWN);
    CHECK(took >= TIMEOUT_MS - 50 && took < TIMEOUT_MS + 300);
    run_for(&f, 300); /* the late NULL reply must not call back twice */
    CHECK_EQ_INT(x.calls, 1);
    kill(r.pid, SIGCONT);
    CHECK_EQ_INT(acquire_again(&f, "hung3", 5000), LK_OK);
    fx_close(&f);
    th_redis_stop(&r);
}

/* Issue 21: a command that times out drops the connection, which then
 * waits out a backoff. An operation submitted right then (Redis answers
 * again) waits for the reconnect within its own deadline instead of
 * failing at once; a release right after its acquire was granted too. */
static void t_request_waits_for_reconnect(void)
{
    struct th_redis r;
    th_redis_start(&r, 0, NULL);
    struct fx f;
    fx_open_on(&f, &r);
    CHECK(wait_node(&f, true, 2000));
    for (int trial = 0; trial < 8; trial++) {
        kill(r.pid, SIGSTOP);
        struct res x;
        memset(&x, 0, sizeof(x));
        struct bk_req a = acquire_req("rc-lost", LEASE_B, 5000, "", false, false);
        CHECK_EQ_INT(submit(&f, &a, on_done, &x), LK_AGAIN);
        CHECK(run_until(&f, &x.done, 5000)); /* its deadline: the connection is dropped */
        CHECK_EQ_INT(x.r.code, LK_BACKEND_DOWN);
        kill(r.pid, SIGCONT);
        CHECK(!node_up(&f)); /* between attempts */
        int64_t t0 = th_now_ms();
        struct reply g = acquire(&f, "rc", LEASE_A, 5000, "");
        CHECK_EQ_INT(g.code, LK_OK);
        CHECK_EQ_INT(release(&f, "rc", LEASE_A, 0).code, LK_OK);
        CHECK(th_now_ms() - t0 < TIMEOUT_MS);
        /* the grant nobody heard of (made when Redis resumed) expires */
        run_for(&f, 20);
        th_redis_cli(&r, "DEL t:{rc-lost}");
    }
    fx_close(&f);
    th_redis_stop(&r);
}

/* What the redis backend does not do (a fence floor on a shared acquire or a
 * semaphore; more holders, bk_req.more, with anything but a reader) is
 * refused, never half done: such a request is answered LK_UNSUPPORTED at
 * once. Shared mode, limit, the floor of an exclusive acquire and readers
 * granted together it does (caps). */
static void t_unsupported(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    CHECK_EQ_INT(f.be.ops->caps, BK_CAP_SHARED | BK_CAP_LIMIT | BK_CAP_FLOOR | BK_CAP_FORCE |
                                     BK_CAP_INDEX | BK_CAP_GROUP | BK_CAP_MULTI | BK_CAP_HANDOFF);
    long long e0 = th_redis_calls(&R, "fcall");
    for (int k = 0; k < 3; k++) {
        struct bk_req a = acquire_req("unsup", LEASE_A, 5000, "", false, false);
        a.fence_floor = 7; /* the floor rides on acquire.lua: exclusive acquires only */
        struct bk_grant_item more = {LEASE_B, "", 5000, false, 0};
        if (k == 0) {
            a.mode = BK_SHARED;
        } else if (k == 1) {
            a.limit = 2;
        } else { /* more holders with a writer: readers only */
            a.fence_floor = 0;
            a.more = &more;
            a.nmore = 1;
        }
        struct res x;
        memset(&x, 0, sizeof(x));
        CHECK_EQ_INT(submit(&f, &a, on_done, &x), LK_OK);
        CHECK_EQ_INT(x.calls, 1);
        CHECK_EQ_INT(x.r.code, LK_UNSUPPORTED);
    }
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - e0, 0);
    CHECK(!inspect(&f, "unsup").held);
    fx_close(&f);
}

/* Inspect with a fence floor (Redlock's levelling, backend_redlock.c
 * level_counters) raises the name's counter to it and never lowers it
 * (a lagging node may have counted past the floor since it was read: a
 * lower counter would give a token twice); a watcher's mark on it stays;
 * the index answered is read after the raise, and the next grant's token
 * is above the raised counter. */
static void t_inspect_floor(void)
{
    struct fx f;
    fx_open_on(&f, &R);
    const long long c0 = 4000000000000100LL; /* above lockd's clock, 2n + 1 below 2^53 */
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "SET t:{fl}:fence %lld", c0);
    CHECK_STR(th_redis_cli(&R, cmd), "OK\n");
    struct res x;
    memset(&x, 0, sizeof(x));
    struct bk_req q = {.op = BK_INSPECT, .name = "fl", .fence_floor = c0 - 50};
    settle(&f, submit(&f, &q, on_done, &x), &x);
    CHECK_EQ_INT(x.r.code, LK_OK);
    CHECK_EQ_INT(x.r.index, 2 * c0 + 1); /* free: 2n+1, n not lowered */
    CHECK_EQ_INT(atoll(th_redis_cli(&R, "GET t:{fl}:fence")), c0);
    snprintf(cmd, sizeof(cmd), "SET t:{fl}:fence %lldw", c0); /* a watcher's mark */
    CHECK_STR(th_redis_cli(&R, cmd), "OK\n");
    memset(&x, 0, sizeof(x));
    q.fence_floor = c0 + 400;
    settle(&f, submit(&f, &q, on_done, &x), &x);
    CHECK_EQ_INT(x.r.code, LK_OK);
    CHECK_EQ_INT(x.r.index, 2 * (c0 + 400) + 1);
    snprintf(cmd, sizeof(cmd), "%lldw\n", c0 + 400);
    CHECK_STR(th_redis_cli(&R, "GET t:{fl}:fence"), cmd);
    struct reply g = acquire(&f, "fl", LEASE_A, 5000, "");
    CHECK_EQ_INT(g.code, LK_OK);
    CHECK(g.fencing_token > c0 + 400);
    CHECK_EQ_INT(release(&f, "fl", LEASE_A, 0).code, LK_OK);
    fx_close(&f);
}

static void t_unreachable_at_startup(void)
{
    struct th_redis r;
    th_redis_start(&r, 0, NULL);
    int port = r.port;
    th_redis_stop(&r);
    struct fx f;
    fx_open_on(&f, &r); /* starts anyway: not ready until Redis answers */
    CHECK(!node_up(&f));
    CHECK_EQ_INT(acquire(&f, "late", LEASE_A, 5000, "").code, LK_BACKEND_DOWN);
    th_redis_start(&r, port, NULL);
    CHECK(wait_node(&f, true, 3000));
    CHECK_EQ_INT(acquire(&f, "late", LEASE_A, 5000, "").code, LK_OK);
    fx_close(&f);
    th_redis_stop(&r);
}

static void t_auth(void)
{
    static const char *const extra[] = {"requirepass s3cret", "user alice on >alicepw ~* &* +@all",
                                        NULL};
    struct th_redis r;
    th_redis_start(&r, 0, extra);
    char url[160], err[256];
    struct fx f;
    struct lk_config cfg;
    struct backend be;

    url_of(&r, ":s3cret", url, sizeof(url));
    fx_open(&f, url, NULL);
    CHECK_EQ_INT(acquire(&f, "auth", LEASE_A, 5000, "").code, LK_OK);
    fx_close(&f);

    url_of(&r, "alice:alicepw", url, sizeof(url)); /* ACL user */
    fx_open(&f, url, NULL);
    CHECK_EQ_INT(acquire(&f, "auth2", LEASE_A, 5000, "").code, LK_OK);
    fx_close(&f);

    url_of(&r, ":wrong", url, sizeof(url));
    cfg_make(&cfg, url, NULL);
    err[0] = '\0';
    CHECK_EQ_INT(backend_redis_new(&cfg, &be, err, sizeof(err)), LK_INVALID);
    printf("# wrong password: %s\n", err);
    CHECK(strstr(err, "authenticate") != NULL);
    CHECK(strstr(err, "wrong") == NULL); /* the password never appears */
    config_free(&cfg);

    url_of(&r, "alice:nope", url, sizeof(url));
    cfg_make(&cfg, url, NULL);
    CHECK_EQ_INT(backend_redis_new(&cfg, &be, err, sizeof(err)), LK_INVALID);
    config_free(&cfg);

    url_of(&r, NULL, url, sizeof(url));
    cfg_make(&cfg, url, NULL);
    CHECK_EQ_INT(backend_redis_new(&cfg, &be, err, sizeof(err)), LK_INVALID);
    printf("# no password: %s\n", err);
    CHECK(strstr(err, "password") != NULL);
    config_free(&cfg);
    th_redis_stop(&r);
}

static void t_bad_urls(void)
{
    static const char *const bad[] = {"http://127.0.0.1:6379",
                                      "redis://",
                                      "redis://h:0",
                                      "redis://h:99999",
                                      "redis://h:6379/x",
                                      "rediss://h:6379",
                                      "redis://a:b@h:1,redis://c:2",
                                      "redis://u:%zz@h:1",
                                      NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        struct lk_config cfg;
        struct backend be;
        char err[256] = "";
        cfg_make(&cfg, bad[i], NULL);
        CHECK_EQ_INT(backend_redis_new(&cfg, &be, err, sizeof(err)), LK_INVALID);
        CHECK(err[0] != '\0');
        config_free(&cfg);
    }
}

static void t_select_db(void)
{
    char url[128];
    struct fx f;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d/3", R.port);
    fx_open(&f, url, NULL);
    CHECK_EQ_INT(acquire(&f, "db3", LEASE_A, 5000, "").code, LK_OK);
    CHECK_EQ_INT(atoll(th_redis_cli(&R, "-n 3 EXISTS t:{db3}")), 1);
    CHECK_EQ_INT(atoll(th_redis_cli(&R, "EXISTS t:{db3}")), 0);
    /* ping answers */
    struct res x;
    memset(&x, 0, sizeof(x));
    struct bk_req ping = {.op = BK_PING};
    settle(&f, submit(&f, &ping, on_done, &x), &x);
    CHECK_EQ_INT(x.r.code, LK_OK);
    fx_close(&f);
}

static struct th_redis *replica_of;

static bool replica_linked(void *arg)
{
    (void)arg;
    /* online = synced and acking offsets, which WAIT counts */
    return strstr(th_redis_cli(replica_of, "INFO replication"), "state=online") != NULL;
}

/* Connections r accepted so far (INFO stats), this redis-cli's included. */
static long long connections_received(struct th_redis *r)
{
    const char *s = strstr(th_redis_cli(r, "INFO stats"), "total_connections_received:");
    CHECK(s != NULL);
    return atoll(s + strlen("total_connections_received:"));
}

static void t_wait_replicas(void)
{
    struct th_redis prim, rep;
    /* Redis 7 waits 5 s for more replicas before a diskless full sync */
    static const char *const prim_extra[] = {"repl-diskless-sync-delay 0", NULL};
    th_redis_start(&prim, 0, prim_extra);
    char line[64];
    snprintf(line, sizeof(line), "replicaof 127.0.0.1 %d", prim.port);
    const char *const extra[] = {line, NULL};
    th_redis_start(&rep, 0, extra);
    replica_of = &prim;
    CHECK(th_wait_for(replica_linked, NULL, 5000));
    char url[128];
    struct fx f;
    url_of(&prim, NULL, url, sizeof(url));
    fx_open(&f, url, "1");
    /* a replica that just turned online may take up to ~1 s to ack its first
     * offset; until then grants are (rightly) undone and answered 503 */
    int64_t t0 = th_now_ms();
    enum lk_code code = LK_BACKEND_DOWN;
    while (code != LK_OK && th_now_ms() - t0 < 5000) {
        code = acquire(&f, "rep", LEASE_A, 5000, "").code;
        CHECK(code == LK_OK || code == LK_BACKEND_DOWN);
    }
    CHECK_EQ_INT(code, LK_OK);
    CHECK_EQ_INT(acquire(&f, "rep1", LEASE_A, 5000, "").code, LK_OK);
    th_redis_stop(&rep);
    struct reply b = acquire(&f, "rep2", LEASE_A, 5000, "");
    CHECK_EQ_INT(b.code, LK_BACKEND_DOWN); /* not on enough replicas: undone, not granted */
    run_for(&f, 100);
    CHECK(!inspect(&f, "rep2").held);

    /* A burst with the replica gone: acquires leave in separate loop turns,
     * so several WAITs would queue on the one connection (Redis blocks a
     * client during WAIT). Each is still answered "not on enough replicas"
     * within the deadline (500 ms), none times out, and the connection
     * stays up: one WAIT covers every write before it (sentinel's failover
     * test caught the connection dropped again and again). */
    enum { BURST = 12 };
    struct res xs[BURST];
    memset(xs, 0, sizeof(xs));
    long long conns = connections_received(&prim);
    for (int i = 0; i < BURST; i++) {
        char name[32];
        snprintf(name, sizeof(name), "burst-%d", i);
        struct bk_req a = acquire_req(name, LEASE_A, 5000, "", false, false);
        CHECK_EQ_INT(submit(&f, &a, on_done, &xs[i]), LK_AGAIN);
        run_for(&f, 10); /* its own loop turn: its own script call and WAIT */
    }
    for (int i = 0; i < BURST; i++) {
        CHECK(run_until(&f, &xs[i].done, 5000));
        CHECK_EQ_INT(xs[i].r.code, LK_BACKEND_DOWN);
    }
    /* never dropped for a late reply: Redis saw no new connection but
     * redis-cli's own */
    CHECK_EQ_INT(connections_received(&prim) - conns, 1);
    CHECK(node_up(&f));
    for (int i = 0; i < BURST; i++) {
        char name[32];
        snprintf(name, sizeof(name), "burst-%d", i);
        CHECK(!inspect(&f, name).held); /* every grant undone */
    }
    fx_close(&f);
    th_redis_stop(&prim);
}

int main(int argc, char **argv)
{
    /* `redis_backend NAME` runs only the cases whose name contains NAME. */
    th_only(argc > 1 ? argv[1] : NULL);
    signal(SIGPIPE, SIG_IGN);
    th_redis_start(&R, 0, NULL);
    TH_RUN(t_bad_urls);
    TH_RUN(t_grant_and_conflict);
    TH_RUN(t_owner_checks);
    TH_RUN(t_one_command_per_op);
    TH_RUN(t_groups);
    TH_RUN(t_shared_groups);
    TH_RUN(t_lone_holder);
    TH_RUN(t_release_handoff);
    TH_RUN(t_handoff_group);
    TH_RUN(t_handoff_trims_to_empty);
    TH_RUN(t_noscript_fallback);
    TH_RUN(t_lock_delay);
    TH_RUN(t_fencing_across_data_loss);
    TH_RUN(t_list);
    TH_RUN(t_renew_many);
    TH_RUN(t_pubsub);
    TH_RUN(t_pubsub_shorter);
    TH_RUN(t_group_release_paths);
    TH_RUN(t_select_db);
    TH_RUN(t_auth);
    TH_RUN(t_unreachable_at_startup);
    TH_RUN(t_redis_killed_and_restarted);
    TH_RUN(t_redis_hung);
    TH_RUN(t_request_waits_for_reconnect);
    TH_RUN(t_unsupported);
    TH_RUN(t_inspect_floor);
    TH_RUN(t_wait_replicas);
    th_redis_stop(&R);
    return th_done();
}
