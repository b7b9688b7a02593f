/*
 * test_engine.c - the engine over the memory backend, without HTTP: grants,
 * exclusion, fencing order, owner-checked renew and release, expiry, lock
 * delay, sessions and reentrancy, a session lock's entry sized to its
 * strings, max_waiters, and the heap behind the janitor.
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/engine.h"
#include "server/engine_int.h"
#include "server/hash.h"
#include "server/heap.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/util.h"

struct got {
    int calls;
    enum lk_code code;
    char lease[40];
    int64_t token;
    int64_t count;
    int64_t ttl;
    char session[40];
    bool lock_delay;
};

static void on_result(void *arg, const struct eng_result *r)
{
    struct got *g = arg;
    g->calls++;
    g->code = r->code;
    g->token = r->fencing_token;
    g->count = r->count;
    g->ttl = r->ttl_ms;
    g->lock_delay = r->has_holder && r->holder.lock_delay;
    if (r->lease)
        snprintf(g->lease, sizeof(g->lease), "%s", r->lease);
}

static void on_session(void *arg, const struct eng_session_view *v)
{
    struct got *g = arg;
    g->calls++;
    g->code = v->code;
    g->count = (int64_t)v->nlocks;
    if (v->session)
        snprintf(g->session, sizeof(g->session), "%s", v->session);
}

struct env {
    struct lk_config cfg;
    struct engine *e;
    struct lk_loop *lp;
};

static int setup(void **state)
{
    static struct env env;
    config_defaults(&env.cfg);
    struct backend bk;
    assert_int_equal(backend_memory_new(&env.cfg, &bk), LK_OK);
    env.e = engine_new(&env.cfg, &bk);
    assert_int_equal(engine_start(env.e), LK_OK);
    env.lp = loop_new(0);
    assert_int_equal(engine_attach(env.e, env.lp), LK_OK);
    *state = &env;
    return 0;
}

static int teardown(void **state)
{
    struct env *env = *state;
    engine_detach(env->e, env->lp);
    engine_free(env->e);
    loop_free(env->lp);
    config_free(&env->cfg);
    return 0;
}

static struct got acquire(struct env *env, const char *name, int64_t ttl, const char *session,
                          bool reentrant)
{
    struct got g;
    memset(&g, 0, sizeof(g));
    struct eng_acquire a = {.name = name,
                            .ttl_ms = ttl,
                            .wait_ms = 0,
                            .session = session,
                            .owner = "t",
                            .reentrant = reentrant,
                            .max_hold_ms = -1};
    struct eng_waiter *w;
    assert_int_equal(engine_acquire(env->e, env->lp, &a, on_result, &g, &w), LK_OK);
    assert_int_equal(g.calls, 1); /* the memory backend answers at once */
    return g;
}

static struct got release(struct env *env, const char *name, const char *lease)
{
    struct got g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(engine_release(env->e, env->lp, name, lease, on_result, &g), LK_OK);
    assert_int_equal(g.calls, 1);
    return g;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_exclusive(void **state)
{
    struct env *env = *state;
    struct got a = acquire(env, "u1", 10000, NULL, false);
    assert_int_equal(a.code, LK_OK);
    assert_int_equal(strlen(a.lease), 32);
    struct got b = acquire(env, "u1", 10000, NULL, false);
    assert_int_equal(b.code, LK_LOCKED);
    struct got wrong = release(env, "u1", "00000000000000000000000000000000");
    assert_int_equal(wrong.code, LK_HELD_BY_OTHER);
    struct got r = release(env, "u1", a.lease);
    assert_int_equal(r.code, LK_OK);
    assert_int_equal(r.token, a.token);
    struct got again = release(env, "u1", a.lease);
    assert_int_equal(again.code, LK_NOT_HELD);
    struct got c = acquire(env, "u1", 10000, NULL, false);
    assert_int_equal(c.code, LK_OK);
    assert_true(c.token > a.token);
    release(env, "u1", c.lease);
}

static void test_renew_and_expiry(void **state)
{
    struct env *env = *state;
    struct got a = acquire(env, "u2", 150, NULL, false);
    struct got g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(engine_renew(env->e, env->lp, "u2", a.lease, 0, on_result, &g), LK_OK);
    assert_int_equal(g.code, LK_OK);
    assert_int_equal(g.ttl, 150);
    assert_int_equal(g.token, a.token);
    sleep_ms(200);
    memset(&g, 0, sizeof(g));
    assert_int_equal(engine_renew(env->e, env->lp, "u2", a.lease, 1000, on_result, &g), LK_OK);
    assert_int_equal(g.code, LK_NOT_HELD); /* expired: a renewal never resurrects it */
    struct got b = acquire(env, "u2", 1000, NULL, false);
    assert_int_equal(b.code, LK_OK);
    assert_true(b.token > a.token);
    release(env, "u2", b.lease);
}

static void test_sessions_reentrant(void **state)
{
    struct env *env = *state;
    struct got s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(engine_session_create(env->e, 5000, "o", 0, on_session, &s), LK_OK);
    assert_int_equal(s.code, LK_OK);
    struct got a = acquire(env, "u3", 1000, s.session, true);
    struct got b = acquire(env, "u3", 1000, s.session, true);
    assert_int_equal(b.code, LK_OK);
    assert_string_equal(a.lease, b.lease);
    assert_int_equal(a.token, b.token);
    assert_int_equal(b.count, 2);
    struct got r1 = release(env, "u3", a.lease);
    assert_int_equal(r1.count, 1);
    assert_int_equal(acquire(env, "u3", 1000, NULL, false).code, LK_LOCKED);
    struct got r2 = release(env, "u3", a.lease);
    assert_int_equal(r2.code, LK_OK);
    assert_int_equal(r2.count, 0);
    struct got c = acquire(env, "u3", 1000, NULL, false);
    assert_int_equal(c.code, LK_OK);
    release(env, "u3", c.lease);

    /* Unknown session: 404, nothing granted. */
    assert_int_equal(acquire(env, "u4", 1000, "0123456789abcdef0123456789abcdef", false).code,
                     LK_SESSION_NOT_FOUND);
    assert_int_equal(acquire(env, "u4", 1000, NULL, false).code, LK_OK);
}

static void on_owner(void *arg, const struct eng_result *r)
{
    char *owner = arg;
    assert_int_equal(r->code, LK_OK);
    assert_non_null(r->owner);
    snprintf(owner, LK_OWNER_MAX + 1, "%s", r->owner);
}

/* The session lock of name in engine->held (keyed by name and lease). */
static struct sess_lock *held_by_name(struct engine *e, const char *name)
{
    struct sess_lock *sl, *tmp, *found = NULL;
    HASH_ITER (hh, e->held, sl, tmp)
        if (strcmp(sl->name, name) == 0)
            found = sl;
    return found;
}

/* A lock held under a session is one block sized to its name and owner, and
 * the longest of both come back whole from a reentrant acquire, which
 * answers from that block. */
static void test_session_lock_sized(void **state)
{
    struct env *env = *state;
    struct got s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(engine_session_create(env->e, 5000, "o", 0, on_session, &s), LK_OK);
    char longest[LK_NAME_MAX + 1], owner[LK_OWNER_MAX + 1];
    memset(longest, 'n', LK_NAME_MAX);
    longest[LK_NAME_MAX] = '\0';
    memset(owner, 'o', LK_OWNER_MAX);
    owner[LK_OWNER_MAX] = '\0';
    const char *names[] = {"orders-42", longest};
    for (int i = 0; i < 2; i++) {
        struct eng_acquire a = {.name = names[i],
                                .ttl_ms = 1000,
                                .session = s.session,
                                .owner = owner,
                                .reentrant = true,
                                .max_hold_ms = -1};
        struct eng_waiter *w;
        char got[2][LK_OWNER_MAX + 1];
        for (int k = 0; k < 2; k++) /* the grant, then the reentrant one */
            assert_int_equal(engine_acquire(env->e, env->lp, &a, on_owner, got[k], &w), LK_OK);
        assert_string_equal(got[0], owner);
        assert_string_equal(got[1], owner);
        struct sess_lock *sl = held_by_name(env->e, names[i]);
        assert_non_null(sl);
        assert_string_equal(sl->name, names[i]);
        assert_int_equal(sl->count, 2);
        /* the strings are the name, the lease (the key's second half) and
         * the owner */
        size_t strings = strlen(names[i]) + 1 + LK_LEASE_LEN + 1 + LK_OWNER_MAX + 1;
        assert_true(malloc_usable_size(sl) >= sizeof(*sl) + strings);
        assert_true(malloc_usable_size(sl) < sizeof(*sl) + strings + 32);
    }
    struct sess_lock *sl = held_by_name(env->e, "orders-42");
    assert_true(malloc_usable_size(sl) < 450); /* fixed arrays took 592 */
    struct got e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(engine_session_end(env->e, env->lp, s.session, on_session, &e), LK_OK);
    assert_int_equal(e.code, LK_OK);
    assert_int_equal(e.count, 2); /* the view lists both locks */
}

static void test_session_expiry_lock_delay(void **state)
{
    struct env *env = *state;
    struct got s;
    memset(&s, 0, sizeof(s));
    engine_session_create(env->e, 1000, "o", 400, on_session, &s);
    struct got a = acquire(env, "u5", 300, s.session, false);
    assert_int_equal(a.code, LK_OK);
    /* The watchdog keeps the 300 ms lease alive while the session lives. */
    sleep_ms(700);
    assert_int_equal(acquire(env, "u5", 1000, NULL, false).code, LK_LOCKED);
    /* No heartbeat: expires at 1 s; then the 400 ms lock-delay applies. */
    sleep_ms(450);
    struct got d = acquire(env, "u5", 1000, NULL, false);
    assert_int_equal(d.code, LK_LOCKED);
    assert_true(d.lock_delay);
    sleep_ms(500);
    struct got ok = acquire(env, "u5", 1000, NULL, false);
    assert_int_equal(ok.code, LK_OK);
    assert_true(ok.token > a.token);
}

static enum lk_code wait_acquire(struct env *env, const char *name, struct got *g,
                                 struct eng_waiter **w)
{
    memset(g, 0, sizeof(*g));
    struct eng_acquire a = {
        .name = name, .ttl_ms = 10000, .wait_ms = 10000, .owner = "t", .max_hold_ms = -1};
    return engine_acquire(env->e, env->lp, &a, on_result, g, w);
}

/* Past max_waiters a blocking acquire is tried once: granted when free,
 * 409 when held. The queue refuses without answering and leaves the try to
 * the engine. */
static void test_max_waiters(void **state)
{
    struct env *env = *state;
    int64_t saved = env->cfg.max_waiters;
    env->cfg.max_waiters = 1;
    struct got holder = acquire(env, "mw", 10000, NULL, false);
    assert_int_equal(holder.code, LK_OK);
    struct got parked, g;
    struct eng_waiter *w = NULL, *w2 = NULL;
    assert_int_equal(wait_acquire(env, "mw", &parked, &w), LK_AGAIN);
    assert_int_equal(parked.calls, 0);
    assert_non_null(w);

    struct eng_acquire a = {
        .name = "mw-free", .ttl_ms = 10000, .wait_ms = 10000, .owner = "t", .max_hold_ms = -1};
    memset(&g, 0, sizeof(g));
    assert_int_equal(waiters_acquire(env->e, env->lp, &a, "0123456789abcdef0123456789abcdef",
                                     on_result, &g, &w2),
                     LK_LOCKED);
    assert_int_equal(g.calls, 0);

    /* Through the engine: tried once. */
    assert_int_equal(wait_acquire(env, "mw-free", &g, &w2), LK_OK);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.code, LK_OK);
    release(env, "mw-free", g.lease);
    assert_int_equal(wait_acquire(env, "mw", &g, &w2), LK_OK);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.code, LK_LOCKED);

    engine_cancel(env->e, w);
    assert_int_equal(parked.calls, 0); /* a withdrawn waiter is not answered */
    release(env, "mw", holder.lease);
    env->cfg.max_waiters = saved;
}

static void test_heap(void **state)
{
    (void)state;
    struct heap h = {0};
    int64_t keys[] = {50, 10, 40, 10, 99, -3, 7, 7, 1000, 0};
    for (size_t i = 0; i < 10; i++)
        heap_push(&h, keys[i], NULL);
    int64_t last = INT64_MIN;
    for (int i = 0; i < 10; i++) {
        const struct heap_item *t = heap_top(&h);
        assert_non_null(t);
        assert_true(t->key >= last);
        last = t->key;
        heap_pop(&h);
    }
    assert_null(heap_top(&h));
    heap_release(&h);
}

/* Names a client could compute to land in one bucket under uthash's default
 * hash (Jenkins with its fixed seed): with server/hash.h's keyed hash they
 * spread, and the table keeps expanding. */
struct hent {
    char name[24];
    UT_hash_handle hh;
};

static void test_hash_flooding(void **state)
{
    (void)state;
    enum { N = 2048 };
    struct hent *ents = calloc(N, sizeof(*ents)), *table = NULL;
    assert_non_null(ents);
    unsigned found = 0;
    for (int64_t i = 0; found < N; i++) {
        char nm[32] = "f";
        size_t n = 1 + lk_itoa(i, nm + 1);
        unsigned hv;
        HASH_JEN(nm, (unsigned)n, hv);
        if ((hv & 0xfff) != 0) /* one bucket of any table up to 4096 buckets */
            continue;
        memcpy(ents[found].name, nm, n + 1);
        HASH_ADD_STR(table, name, &ents[found]);
        found++;
    }
    const UT_hash_table *tbl = table->hh.tbl;
    assert_int_equal(tbl->num_items, N);
    assert_false(tbl->noexpand);
    unsigned longest = 0;
    for (unsigned b = 0; b < tbl->num_buckets; b++)
        if (tbl->buckets[b].count > longest)
            longest = tbl->buckets[b].count;
    assert_true(longest <= 32);
    struct hent *e = NULL;
    HASH_FIND_STR(table, ents[N / 2].name, e);
    assert_ptr_equal(e, &ents[N / 2]);
    HASH_CLEAR(hh, table);
    free(ents);
}

static void on_session_names(void *arg, const struct eng_session_view *v)
{
    struct got *g = arg;
    on_session(arg, v);
    g->lock_delay = v->nlost > 0; /* reused: "something was reported lost" */
}

/* Sessions key their locks by (name, lease): two leases on one name in one
 * session table (two shared holders, or an old lease whose loss is not seen
 * yet) are two entries. Adding the second must not mark the first lost, and
 * releasing or renewing one leaves the other as it was. */
static void test_two_leases_one_name(void **state)
{
    struct env *env = *state;
    struct got s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(engine_session_create(env->e, 5000, "o", 0, on_session, &s), LK_OK);
    const char *l1 = "11111111111111111111111111111111", *l2 = "22222222222222222222222222222222";
    assert_int_equal(session_add_lock(env->e, s.session, "two", l1, "a", 7, 3000, 0, true, 1),
                     LK_OK);
    assert_int_equal(session_add_lock(env->e, s.session, "two", l2, "b", 8, 6000, 0, true, 1),
                     LK_OK);
    struct got v;
    memset(&v, 0, sizeof(v));
    assert_int_equal(engine_session_get(env->e, s.session, true, on_session_names, &v), LK_OK);
    assert_int_equal(v.count, 2); /* both listed */
    assert_false(v.lock_delay);   /* neither lost */

    char sid[LK_SESSION_LEN + 1];
    assert_int_equal(session_note_renew(env->e, "two", l2, 9000, sid), 1);
    int64_t left = -1, token = -1;
    assert_int_equal(session_release_begin(env->e, "two", l1, &left, &token), SR_LAST);
    session_release_end(env->e, "two", l1, LK_OK);
    assert_int_equal(session_release_begin(env->e, "two", l1, &left, &token), SR_UNBOUND);

    memset(&v, 0, sizeof(v));
    assert_int_equal(engine_session_get(env->e, s.session, true, on_session_names, &v), LK_OK);
    assert_int_equal(v.count, 1);
    assert_false(v.lock_delay);
    struct sess_lock *sl = held_by_name(env->e, "two");
    assert_non_null(sl);
    assert_string_equal(sl->lease, l2);
    assert_int_equal(sl->token, 8);
    assert_int_equal(sl->ttl_ms, 9000); /* its own renewal, not the other's */
    struct got e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(engine_session_end(env->e, env->lp, s.session, on_session, &e), LK_OK);
}

/* A release the backend did not confirm (503) leaves the lock in its
 * session: still listed, still renewed by the watchdog. Only an answer that
 * says it is gone detaches it. */
static void test_release_unconfirmed_keeps_lock(void **state)
{
    struct env *env = *state;
    struct got s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(engine_session_create(env->e, 5000, "o", 0, on_session, &s), LK_OK);
    struct got g = acquire(env, "kept", 3000, s.session, false);
    assert_int_equal(g.code, LK_OK);
    int64_t left, token;
    assert_int_equal(session_release_begin(env->e, "kept", g.lease, &left, &token), SR_LAST);
    session_release_end(env->e, "kept", g.lease, LK_BACKEND_DOWN);
    struct got v;
    memset(&v, 0, sizeof(v));
    assert_int_equal(engine_session_get(env->e, s.session, false, on_session_names, &v), LK_OK);
    assert_int_equal(v.count, 1);
    struct sess_lock *sl = held_by_name(env->e, "kept");
    assert_non_null(sl);
    assert_false(sl->dead);
    assert_true(sl->in_heap || sl->in_flight); /* the watchdog still has it */
    /* and now the backend confirms */
    assert_int_equal(session_release_begin(env->e, "kept", g.lease, &left, &token), SR_LAST);
    session_release_end(env->e, "kept", g.lease, LK_OK);
    assert_null(held_by_name(env->e, "kept"));
    struct got r = release(env, "kept", g.lease);
    assert_int_equal(r.code, LK_OK); /* the backend still held it: released now */
    struct got e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(engine_session_end(env->e, env->lp, s.session, on_session, &e), LK_OK);
}

/* A renewal that finds the lease gone while its client's release is at the
 * backend (the release ran first there; its answer is not back yet) means
 * released, not lost. */
static void test_renewal_racing_release(void **state)
{
    struct env *env = *state;
    struct got s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(engine_session_create(env->e, 5000, "o", 0, on_session, &s), LK_OK);
    const char *l1 = "33333333333333333333333333333333";
    assert_int_equal(session_add_lock(env->e, s.session, "racy", l1, "a", 9, 3000, 0, false, 1),
                     LK_OK);
    int64_t left, token;
    assert_int_equal(session_release_begin(env->e, "racy", l1, &left, &token), SR_LAST);
    char(*capped)[2][LK_NAME_MAX + 1];
    size_t ncapped = 0;
    /* stop the janitor's own ticks from taking it first: take it by hand */
    pthread_mutex_lock(&env->e->smu);
    struct sess_lock *sl = held_by_name(env->e, "racy");
    pthread_mutex_unlock(&env->e->smu);
    assert_non_null(sl);
    struct wd_batch *b = NULL;
    for (int tries = 0; b == NULL && tries < 100; tries++)
        b = session_watchdog_due(env->e, lk_now_ms() + 60000, &capped, &ncapped);
    free(capped);
    assert_non_null(b);
    size_t i;
    for (i = 0; i < b->n && b->locks[i] != sl; i++)
        ;
    assert_true(i < b->n);
    b->items[i].result = LK_NOT_HELD;
    session_watchdog_done(b);
    struct got v;
    memset(&v, 0, sizeof(v));
    assert_int_equal(engine_session_get(env->e, s.session, true, on_session_names, &v), LK_OK);
    assert_int_equal(v.count, 0); /* gone from locks */
    assert_false(v.lock_delay);   /* and not reported lost */
    session_release_end(env->e, "racy", l1, LK_OK);
    struct got e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(engine_session_end(env->e, env->lp, s.session, on_session, &e), LK_OK);
}

/* Session callbacks run with smu free: a callback may call the engine. */
static struct engine *cb_engine;
static void on_session_free_lock(void *arg, const struct eng_session_view *v)
{
    on_session(arg, v);
    assert_int_equal(pthread_mutex_trylock(&cb_engine->smu), 0);
    pthread_mutex_unlock(&cb_engine->smu);
    (void)engine_session_count(cb_engine);
}

static void test_session_callbacks_unlocked(void **state)
{
    struct env *env = *state;
    cb_engine = env->e;
    struct got s, v, e;
    memset(&s, 0, sizeof(s));
    memset(&v, 0, sizeof(v));
    memset(&e, 0, sizeof(e));
    assert_int_equal(engine_session_create(env->e, 5000, "o", 0, on_session_free_lock, &s), LK_OK);
    assert_int_equal(s.calls, 1);
    assert_int_equal(engine_session_get(env->e, s.session, true, on_session_free_lock, &v), LK_OK);
    assert_int_equal(engine_session_get(env->e, s.session, false, on_session_free_lock, &v), LK_OK);
    assert_int_equal(v.calls, 2);
    assert_int_equal(engine_session_end(env->e, env->lp, s.session, on_session_free_lock, &e),
                     LK_OK);
    assert_int_equal(e.calls, 1);
}

/* max_waiters counts this engine's waiters, not the process-wide gauge:
 * another engine's waiters (or a gauge off by anything) change nothing. */
static void test_max_waiters_own_count(void **state)
{
    struct env *env = *state;
    int64_t saved = env->cfg.max_waiters;
    env->cfg.max_waiters = 1;
    metrics_add(M_WAITERS, 5); /* the gauge says more than max_waiters */
    struct got holder = acquire(env, "own", 10000, NULL, false);
    assert_int_equal(holder.code, LK_OK);
    struct got parked;
    struct eng_waiter *w = NULL;
    assert_int_equal(wait_acquire(env, "own", &parked, &w), LK_AGAIN); /* queued */
    assert_int_equal(parked.calls, 0);
    engine_cancel(env->e, w);
    metrics_add(M_WAITERS, -5);
    release(env, "own", holder.lease);
    env->cfg.max_waiters = saved;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusive),
        cmocka_unit_test(test_renew_and_expiry),
        cmocka_unit_test(test_sessions_reentrant),
        cmocka_unit_test(test_session_expiry_lock_delay),
        cmocka_unit_test(test_max_waiters),
        cmocka_unit_test(test_heap),
        cmocka_unit_test(test_hash_flooding),
        cmocka_unit_test(test_session_lock_sized),
        cmocka_unit_test(test_two_leases_one_name),
        cmocka_unit_test(test_release_unconfirmed_keeps_lock),
        cmocka_unit_test(test_session_callbacks_unlocked),
        cmocka_unit_test(test_max_waiters_own_count),
        cmocka_unit_test(test_renewal_racing_release),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
