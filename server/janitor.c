/*
 * janitor.c - the periodic work, on its own thread and loop (never a request
 * thread), like pgbouncer's janitor: every tick it reaps sessions that missed
 * their heartbeat (releasing their locks with compare-and-delete and
 * Chubby's lock-delay when asked), runs the watchdog (renewing every lease
 * held under a live session at ttl/3 in batched backend calls) and lets the
 * backend sweep. At exit it releases session locks when release_on_shutdown
 * is set. The session table itself is session.c; the backend is reached
 * through engine_bk.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "server/engine_int.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"

#define JANITOR_TICK_S 0.01

/* ---- the reaper ---- */

/* "session expired" with the locks it held, which the reaper now releases:
 * names comma-separated (a name has no comma), cut with "..." past 2 KiB
 * (the count says how many). */
static void log_expired(const struct sess_end *se)
{
    char names[2048], count[24];
    size_t off = 0;
    names[0] = '\0';
    for (size_t i = 0; i < se->n; i++) {
        size_t len = strlen(se->names[i]);
        if (off + len + 5 >= sizeof(names)) {
            memcpy(names + off, "...", 4);
            break;
        }
        if (i > 0)
            names[off++] = ',';
        memcpy(names + off, se->names[i], len + 1);
        off += len;
    }
    snprintf(count, sizeof(count), "%zu", se->n);
    lk_log_kv(LK_INFO, "session expired", "session", se->id, "locks", count, "names", names,
              (char *)NULL);
}

static void reap(struct engine *e, int64_t now)
{
    struct sess_end *list = session_reap_due(e, now);
    while (list != NULL) {
        struct sess_end *se = list;
        list = se->next;
        metrics_add(M_SESSIONS_EXPIRED, 1);
        if (LK_INFO >= lk_log_level)
            log_expired(se);
        waiters_fail(e, se->id);
        for (size_t i = 0; i < se->n; i++)
            /* Compare-and-delete: never someone else's lock. */
            waiters_release_bg(e, e->jloop, se->names[i], se->leases[i], se->delay_ms, false);
        sess_end_free(se);
    }
}

/* ---- the watchdog ---- */

static void batch_done(void *arg, const struct bk_res *r)
{
    (void)r; /* each item carries its own result */
    session_watchdog_done(arg);
}

static void watchdog(struct engine *e, int64_t now)
{
    char(*capped)[2][LK_NAME_MAX + 1];
    size_t ncapped;
    struct wd_batch *b = session_watchdog_due(e, now, &capped, &ncapped);
    for (size_t i = 0; i < ncapped; i++)
        waiters_release_bg(e, e->jloop, capped[i][0], capped[i][1], 0, true);
    free(capped);
    while (b != NULL) {
        struct wd_batch *next = b->next; /* b may be freed inside submit */
        struct bk_req req = {.op = BK_RENEW_MANY, .items = b->items, .nitems = b->n};
        enum lk_code c = engine_bk_submit(e, e->jloop, &b->call, &req, batch_done, b);
        (void)c; /* batch_done runs either way */
        b = next;
    }
}

static void on_tick(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev;
    (void)revents;
    struct engine *e = t->data;
    int64_t now = lk_now_ms();
    reap(e, now);
    watchdog(e, now);
    if (e->bk.ops->sweep != NULL)
        e->bk.ops->sweep(e->bk.state);
    engine_plain_sweep(e, now);
}

static void *janitor_main(void *arg)
{
    struct engine *e = arg;
    loop_run(e->jloop);
    return NULL;
}

static void janitor_init(void *arg)
{
    struct engine *e = arg;
    ev_timer_init(&e->jtick, on_tick, JANITOR_TICK_S, JANITOR_TICK_S);
    e->jtick.data = e;
    ev_timer_start(loop_ev(e->jloop), &e->jtick);
}

enum lk_code janitor_start(struct engine *e)
{
    e->jloop = loop_new(LOOP_JANITOR);
    enum lk_code c = e->bk.ops->attach(e->bk.state, e->jloop);
    if (c != LK_OK) {
        loop_free(e->jloop);
        e->jloop = NULL;
        return c;
    }
    loop_post(e->jloop, janitor_init, e);
    if (pthread_create(&e->jthread, NULL, janitor_main, e) != 0) {
        e->bk.ops->detach(e->bk.state, e->jloop);
        loop_free(e->jloop);
        e->jloop = NULL;
        return LK_INTERNAL;
    }
    e->jstarted = true;
    return LK_OK;
}

static void janitor_fini(void *arg)
{
    struct engine *e = arg;
    ev_timer_stop(loop_ev(e->jloop), &e->jtick);
    e->bk.ops->detach(e->bk.state, e->jloop);
}

void janitor_stop(struct engine *e)
{
    if (!e->jstarted)
        return;
    loop_post(e->jloop, janitor_fini, e);
    loop_stop(e->jloop);
    pthread_join(e->jthread, NULL);
    loop_free(e->jloop);
    e->jloop = NULL;
    e->jstarted = false;
}

/* ---- release_on_shutdown ---- */

/* The releases run on the janitor loop (the main thread has no backend
 * connection) and the main thread waits for them on a condition variable,
 * bounded. Whoever drops the last reference frees. */
struct shut {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct engine *e;
    struct sess_end *ends;
    size_t n;
    size_t left; /* releases not answered yet */
    size_t released;
    int refs; /* the main thread + one per release not answered */
};

static void shut_free(struct shut *sh)
{
    while (sh->ends != NULL) {
        struct sess_end *se = sh->ends;
        sh->ends = se->next;
        sess_end_free(se);
    }
    pthread_cond_destroy(&sh->cv);
    pthread_mutex_destroy(&sh->mu);
    free(sh);
}

static void shut_unref(struct shut *sh)
{
    pthread_mutex_lock(&sh->mu);
    bool last = --sh->refs == 0;
    pthread_mutex_unlock(&sh->mu);
    if (last)
        shut_free(sh);
}

static void shut_release_done(void *arg, const struct bk_res *r)
{
    struct shut *sh = arg;
    pthread_mutex_lock(&sh->mu);
    sh->left--;
    if (r->code == LK_OK)
        sh->released++;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
    shut_unref(sh);
}

/* On the janitor loop. sh (and its lists) stay alive until the last
 * callback ran: each release holds a reference, taken before this was
 * posted. */
static void shut_issue(void *arg)
{
    struct shut *sh = arg;
    for (struct sess_end *se = sh->ends; se != NULL; se = se->next)
        for (size_t i = 0; i < se->n; i++)
            /* Compare-and-delete, no lock-delay: a clean release. */
            engine_bk_release(sh->e, sh->e->jloop, se->names[i], se->leases[i], 0, false,
                              shut_release_done, sh);
}

void engine_shutdown(struct engine *e)
{
    if (!e->cfg->release_on_shutdown || !e->jstarted)
        return;
    struct shut *sh = lk_calloc(1, sizeof(*sh));
    pthread_mutex_init(&sh->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sh->cv, &ca);
    pthread_condattr_destroy(&ca);
    sh->e = e;

    /* End every session: the watchdog stops renewing, heartbeats get 404. */
    sh->ends = session_end_all(e);
    for (struct sess_end *se = sh->ends; se != NULL; se = se->next)
        sh->n += se->n;
    if (sh->n == 0) {
        shut_free(sh);
        return;
    }
    sh->left = sh->n;
    sh->refs = 1 + (int)sh->n;
    loop_post(e->jloop, shut_issue, sh);

    /* Bounded: one backend deadline plus a little; past it the rest expire
     * at their TTL. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t wait_ms = e->cfg->backend_timeout_ms + 500;
    ts.tv_sec += (time_t)(wait_ms / 1000);
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&sh->mu);
    while (sh->left > 0) {
        if (pthread_cond_timedwait(&sh->cv, &sh->mu, &ts) != 0)
            break; /* ETIMEDOUT */
    }
    size_t total = sh->n, released = sh->released, left = sh->left;
    pthread_mutex_unlock(&sh->mu);
    char a[24], b[24];
    snprintf(a, sizeof(a), "%zu", released);
    snprintf(b, sizeof(b), "%zu", total);
    lk_log_kv(left > 0 ? LK_WARN : LK_INFO, "release_on_shutdown", "released", a, "locks", b,
              (char *)NULL);
    shut_unref(sh);
}
