/*
 * conformance.c - runs the conformance cases (cases.c) on one backend of the
 * table (backends.c): `conformance NAME [CASE]`, or `conformance --list` for
 * the names. Each case gets the backend freshly opened through
 * backend_open() and attached to one lk_loop, which this thread runs while a
 * request is in flight. Prints "ok CASE" or "SKIP CASE (why)" per case and
 * exits non-zero at the first failure (tests/lib/harness.h's checks).
 */
#include "tests/conformance/conformance.h"

#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/loop.h"
#include "tests/lib/harness.h"

/* ---- running the loop ---- */

static void on_tick(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)w;
    (void)revents;
}

static bool all_done(struct cf_res *const *res, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!res[i]->done)
            return false;
    return true;
}

/* A 5 ms ticker keeps ev_run from blocking past the deadline. */
static bool run_until(struct cf *c, struct cf_res *const *res, size_t n, int64_t timeout_ms)
{
    struct ev_loop *ev = loop_ev(c->lp);
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.005, 0.005);
    ev_timer_start(ev, &tick);
    int64_t end = th_now_ms() + timeout_ms;
    while (!all_done(res, n) && th_now_ms() < end)
        ev_run(ev, EVRUN_ONCE);
    ev_timer_stop(ev, &tick);
    return all_done(res, n);
}

void cf_run_for(struct cf *c, int64_t ms)
{
    static struct cf_res never; /* never done */
    struct cf_res *p = &never;
    (void)run_until(c, &p, 1, ms);
}

bool cf_settle(struct cf *c, struct cf_res *const *res, size_t n, int64_t timeout_ms)
{
    return run_until(c, res, n, timeout_ms);
}

/* ---- the callback: copy what the result points at, it dies with done ---- */

struct pending {
    struct cf_res *res;
    int64_t t0;
    size_t nnames; /* ACQUIRE_MULTI: how many tokens a grant carries */
};

static struct pending pendings[64];

static void on_done(void *arg, const struct bk_res *r)
{
    struct pending *p = arg;
    struct cf_res *x = p->res;
    x->calls++;
    if (x->calls > 1)
        th_fail(__FILE__, __LINE__, "done ran %d times for one request", x->calls);
    x->done = true;
    x->took_ms = th_now_ms() - p->t0;
    x->code = r->code;
    x->fencing_token = r->fencing_token;
    x->ttl_ms = r->ttl_ms;
    x->validity_ms = r->validity_ms;
    x->room = r->room;
    x->delay_ms = r->delay_ms;
    x->limit = r->limit;
    x->total_holders = r->total_holders;
    x->index = r->index;
    CHECK(r->nholders == 0 || r->holders != NULL);
    CHECK(r->nholders <= CF_MAX_HOLDERS);
    x->nholders = r->nholders;
    for (size_t i = 0; i < r->nholders; i++)
        x->holders[i] = r->holders[i];
    CHECK(r->nentries == 0 || r->entries != NULL);
    CHECK(r->nentries <= CF_MAX_ENTRIES);
    x->nentries = r->nentries;
    for (size_t i = 0; i < r->nentries; i++) {
        CHECK(r->entries[i].name != NULL && strlen(r->entries[i].name) <= LK_NAME_MAX);
        strcpy(x->entries[i].name, r->entries[i].name);
        x->entries[i].holder = r->entries[i].holder;
        x->entries[i].nholders = r->entries[i].nholders;
        x->entries[i].limit = r->entries[i].limit;
        x->entries[i].index = r->entries[i].index;
    }
    x->has_next = r->next_cursor != NULL;
    x->next_cursor[0] = '\0';
    if (r->next_cursor != NULL) {
        CHECK(strlen(r->next_cursor) < sizeof(x->next_cursor));
        strcpy(x->next_cursor, r->next_cursor);
    }
    snprintf(x->refusal, sizeof(x->refusal), "%s", r->refusal != NULL ? r->refusal : "");
    x->items = r->items;
    x->nitems = r->nitems;
    x->blocked = r->blocked;
    x->ntokens = r->code == LK_OK && r->tokens != NULL ? p->nnames : 0;
    CHECK(x->ntokens <= 64);
    for (size_t i = 0; i < x->ntokens; i++)
        x->tokens[i] = r->tokens[i];
    /* what every result must satisfy, whatever the case */
    if (r->code == LK_OK && r->fencing_token != 0)
        CHECK(r->fencing_token > 0 && r->fencing_token < (1LL << 53)); /* exact in JSON */
    for (size_t i = 0; i < r->nholders; i++) {
        CHECK(r->holders[i].fencing_token > 0);
        if (i > 0) /* newest token first */
            CHECK(r->holders[i].fencing_token < r->holders[i - 1].fencing_token);
    }
    CHECK(r->nholders == 0 || r->delay_ms == 0); /* a lock-delay means nobody holds it */
}

void cf_submit_async(struct cf *c, const struct bk_req *req, struct cf_res *res, int64_t *t0)
{
    struct pending *p = NULL;
    for (size_t i = 0; i < sizeof(pendings) / sizeof(pendings[0]); i++)
        if (pendings[i].res == NULL || pendings[i].res->done) {
            p = &pendings[i];
            break;
        }
    CHECK(p != NULL);
    memset(res, 0, sizeof(*res));
    p->res = res;
    p->t0 = th_now_ms();
    p->nnames = req->op == BK_ACQUIRE_MULTI ? req->nnames : 0;
    if (t0 != NULL)
        *t0 = p->t0;
    enum lk_code rc = c->be.ops->submit(c->be.state, c->lp, req, on_done, p);
    if (rc == LK_OK) { /* answered before submit returned */
        CHECK(res->done);
    } else {
        CHECK_EQ_INT(rc, LK_AGAIN); /* or later, on this loop */
        CHECK(!res->done);
    }
}

void cf_submit(struct cf *c, const struct bk_req *req, struct cf_res *res)
{
    cf_submit_async(c, req, res, NULL);
    struct cf_res *p = res;
    CHECK(run_until(c, &p, 1, 10000));
    CHECK_EQ_INT(res->calls, 1);
}

/* ---- shorthands ---- */

static struct cf_res shared_res;

const struct cf_res *cf_acquire(struct cf *c, const char *name, const char *lease,
                                const char *owner, int64_t ttl_ms)
{
    return cf_acquire_as(c, name, lease, owner, ttl_ms, BK_EXCLUSIVE, 1, false);
}

const struct cf_res *cf_acquire_as(struct cf *c, const char *name, const char *lease,
                                   const char *owner, int64_t ttl_ms, enum bk_mode mode,
                                   int64_t limit, bool wait)
{
    struct bk_req q = {.op = BK_ACQUIRE,
                       .name = name,
                       .lease = lease,
                       .owner = owner,
                       .mode = mode,
                       .limit = limit,
                       .ttl_ms = ttl_ms,
                       .wait = wait};
    cf_submit(c, &q, &shared_res);
    const struct cf_res *r = &shared_res;
    if (r->code == LK_OK) {
        CHECK(r->fencing_token > 0);
        CHECK_EQ_INT(r->ttl_ms, ttl_ms);
        /* validity: not computed, or no longer than the lease */
        CHECK(r->validity_ms == -1 || (r->validity_ms > 0 && r->validity_ms <= ttl_ms));
    }
    return r;
}

const struct cf_res *cf_renew(struct cf *c, const char *name, const char *lease, int64_t ttl_ms)
{
    struct bk_req q = {.op = BK_RENEW, .name = name, .lease = lease, .ttl_ms = ttl_ms};
    cf_submit(c, &q, &shared_res);
    const struct cf_res *r = &shared_res;
    if (r->code == LK_OK) {
        CHECK(r->fencing_token > 0);
        CHECK(r->ttl_ms > 0);
        if (ttl_ms > 0)
            CHECK_EQ_INT(r->ttl_ms, ttl_ms);
        CHECK(r->validity_ms == -1 || (r->validity_ms > 0 && r->validity_ms <= r->ttl_ms));
    }
    return r;
}

const struct cf_res *cf_release(struct cf *c, const char *name, const char *lease, int64_t delay_ms)
{
    struct bk_req q = {.op = BK_RELEASE, .name = name, .lease = lease, .delay_ms = delay_ms};
    cf_submit(c, &q, &shared_res);
    return &shared_res;
}

const struct cf_res *cf_inspect(struct cf *c, const char *name)
{
    struct bk_req q = {.op = BK_INSPECT, .name = name};
    cf_submit(c, &q, &shared_res);
    return &shared_res;
}

int64_t cf_grant(struct cf *c, const char *name, const char *lease, const char *owner)
{
    const struct cf_res *r = cf_acquire(c, name, lease, owner, 60000);
    if (r->code != LK_OK)
        th_fail(__FILE__, __LINE__, "acquire '%s': %s, want LK_OK", name, lk_code_name(r->code));
    return r->fencing_token;
}

int64_t cf_acquire_within(struct cf *c, const char *name, const char *lease, int64_t timeout_ms,
                          enum lk_code want_before, int *tries)
{
    int64_t end = th_now_ms() + timeout_ms;
    int n = 0;
    for (;;) {
        const struct cf_res *r = cf_acquire(c, name, lease, "", 60000);
        n++;
        if (r->code == LK_OK) {
            if (tries != NULL)
                *tries = n;
            return r->fencing_token;
        }
        /* a Redis-based backend re-asserting its leases after a restart
         * (issue 25) grants nothing new meanwhile, and says so */
        if (r->code != want_before && r->code != LK_BACKEND_RECOVERING)
            th_fail(__FILE__, __LINE__, "acquire '%s' (try %d): %s, want %s or LK_OK", name, n,
                    lk_code_name(r->code), lk_code_name(want_before));
        if (th_now_ms() >= end)
            th_fail(__FILE__, __LINE__, "acquire '%s' not granted within %lld ms (%d tries)", name,
                    (long long)timeout_ms, n);
        cf_run_for(c, 10);
    }
}

/* ---- one case on a freshly opened backend ---- */

static void cf_open(struct cf *c, const struct cf_backend *def)
{
    char err[256] = "";
    memset(c, 0, sizeof(*c));
    c->def = def;
    config_defaults(&c->cfg);
    def->open(&c->cfg);
    char ms[24];
    snprintf(ms, sizeof(ms), "%d", CF_TIMEOUT_MS);
    CHECK(config_set(&c->cfg, "backend_timeout_ms", ms, "conformance", err, sizeof(err)) == 0);
    enum lk_code rc = backend_open(&c->cfg, &c->be, err, sizeof(err));
    if (rc != LK_OK)
        th_fail(__FILE__, __LINE__, "backend_open(%s): %s: %s", def->name, lk_code_name(rc), err);
    CHECK(c->be.ops != NULL && c->be.ops->submit != NULL && c->be.ops->nodes != NULL);
    CHECK_STR(c->be.ops->name, def->name);
    c->lp = loop_new(0);
    CHECK_EQ_INT(c->be.ops->attach(c->be.state, c->lp), LK_OK);
}

static void cf_close(struct cf *c)
{
    c->be.ops->detach(c->be.state, c->lp);
    c->be.ops->free(c->be.state);
    loop_free(c->lp);
    config_free(&c->cfg);
}

/* Why def cannot run k, or NULL when it can. */
static const char *skip_reason(const struct cf_backend *def, const struct cf_case *k, unsigned caps)
{
    if ((k->needs & CF_NEEDS_PAUSE) && (def->pause == NULL || def->resume == NULL))
        return "no fault hook";
    if ((k->needs & CF_NEEDS_RESTART) && def->restart == NULL)
        return "no fault hook";
    if ((caps & k->caps) != k->caps)
        return "capability not declared";
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (const struct cf_backend *b = cf_backends; b->name != NULL; b++)
            printf("%s\n", b->name);
        return 0;
    }
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s BACKEND [CASE] | --list\n", argv[0]);
        return 2;
    }
    const struct cf_backend *def = NULL;
    for (const struct cf_backend *b = cf_backends; b->name != NULL; b++)
        if (strcmp(b->name, argv[1]) == 0)
            def = b;
    if (def == NULL) {
        fprintf(stderr, "conformance: unknown backend '%s' (see --list)\n", argv[1]);
        return 2;
    }
    const char *only = argc == 3 ? argv[2] : NULL;
    signal(SIGPIPE, SIG_IGN);
    (void)th_tmpdir(); /* registers the cleanup that kills what start left running */
    if (def->start != NULL)
        def->start();
    static struct cf c;
    cf_open(&c, def); /* what it declares, for the cases that need a capability */
    unsigned caps = c.be.ops->caps;
    cf_close(&c);
    int ran = 0;
    for (const struct cf_case *k = cf_cases; k->name != NULL; k++) {
        if (only != NULL && strcmp(k->name, only) != 0)
            continue;
        ran++;
        const char *why = skip_reason(def, k, caps);
        if (why != NULL) {
            printf("SKIP %s (%s)\n", k->name, why);
            continue;
        }
        th_case_begin(k->name);
        cf_open(&c, def);
        k->run(&c);
        cf_close(&c);
        th_case_end(k->name);
    }
    if (def->stop != NULL)
        def->stop();
    if (ran == 0) {
        fprintf(stderr, "conformance: no case named '%s'\n", only);
        return 2;
    }
    printf("conformance[%s]: ", def->name);
    return th_done();
}
