/*
 * engine_int.h - the engine's private state and the interfaces between its
 * parts. Not for api/. Who calls whom (never the other way round):
 *
 *   engine.c (the public API)  -> waiters.c, session.c, janitor.c, engine_bk.c
 *   janitor.c (reaper, watchdog, shutdown) -> session.c, waiters.c, engine_bk.c
 *   waiters.c (blocking acquires)          -> session.c, engine_bk.c
 *   session.c (the session table)          -> nothing of the engine
 *   engine_bk.c (the one way to the backend: timing, metrics per node,
 *                undo)                     -> the backend
 *
 * Locks: wmu guards waiter queues, smu guards sessions and their locks. Never
 * hold either across a backend call or while calling a user callback; when
 * both are needed take smu first.
 */
#ifndef LOCKD_SERVER_ENGINE_INT_H
#define LOCKD_SERVER_ENGINE_INT_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>

#include "server/backend.h"
#include "server/engine.h"
#include "server/hash.h"
#include "server/heap.h"

struct session;

/* A lock held under a session through this lockd: the watchdog renews it.
 * Keyed by (name, lease) in engine->held and in its session: two leases on
 * one name (two shared holders, or an old lease whose loss is not noticed
 * yet) are two entries. One allocation sized to its strings, which never
 * change: "name\0lease\0owner\0", the key being "name\0lease". */
struct sess_lock {
    int64_t token;
    int64_t ttl_ms;
    int64_t count;         /* reentrant holds */
    int64_t hold_until_ms; /* max_hold_ms deadline (monotonic); 0 = unbounded */
    int64_t expires_ms;    /* lease expiry as of our last successful renewal */
    int64_t granted_us;    /* monotonic: lockd_lock_hold_seconds */
    struct session *s;
    UT_hash_handle hh; /* engine->held, by (name, lease) */
    UT_hash_handle sh; /* session->locks, by (name, lease) */
    const char *lease; /* into name[] */
    const char *owner; /* into name[] */
    bool dead;         /* released or lost: freed when popped off the heap */
    bool in_flight;    /* part of a watchdog batch right now */
    bool in_heap;
    bool releasing; /* its client's release is at the backend */
    bool shared;    /* the mode it was granted in: a reentrant acquire must ask the same */
    int64_t limit;  /* the limit it was granted with (1 unless a semaphore) */
    char name[];    /* name, lease, owner: see above */
};

/* The bytes of a sess_lock's key for a name of nlen bytes. */
#define SESS_KEY_LEN(nlen) ((nlen) + 1 + LK_LEASE_LEN)

struct session {
    char id[LK_SESSION_LEN + 1];
    char owner[LK_OWNER_MAX + 1];
    int64_t ttl_ms;
    int64_t deadline_ms;
    int64_t lock_delay_ms;
    struct sess_lock *locks;
    char **lost;
    size_t nlost;
    bool dead; /* ended or expired: freed when popped off the heap */
    UT_hash_handle hh;
};

struct wqueue;
struct wlist;

struct engine {
    const struct lk_config *cfg;
    struct backend bk;
    atomic_bool draining;

    pthread_mutex_t wmu;
    struct wqueue *queues;
    struct wlist *watches; /* under wmu: watchers by name (waiters.c) */
    atomic_int nwatched;   /* names in watches: 0 lets a grant skip wmu */
    int64_t nwaiters;      /* under wmu: what max_waiters bounds */

    pthread_mutex_t smu;
    struct session *sessions;
    struct sess_lock *held;
    size_t nsessions;
    struct heap sess_heap; /* (deadline, session) */
    /* The plain leases this lockd granted and has not seen released or
     * expired (any thread; its own leaf mutexes): lockd_locks_held
     * {session_bound="false"} and their lockd_lock_hold_seconds. Session
     * locks are counted through held. */
    struct glog *plain;
    struct heap renew_heap; /* (next renewal, sess_lock) */

    struct lk_loop *jloop; /* janitor: watchdog and reaper */
    pthread_t jthread;
    bool jstarted;
    ev_timer jtick;
};

/* ---- engine_bk.c: every backend call goes through here ---- */

/* Storage for one call in flight, embedded in the caller's own record so a
 * call costs no allocation; it must live until done ran. */
struct bk_call {
    struct engine *e;
    bk_done_fn done;
    void *arg;
    int64_t start_us;
    unsigned op; /* enum bk_op: the latency histogram's op label */
};

/* Submits req; done(arg, res) runs exactly once (synchronously: returns
 * LK_OK; later on lp's thread: LK_AGAIN). Times the call and counts its
 * LK_BACKEND_DOWN per node. A request the backend's caps do not cover is
 * answered LK_UNSUPPORTED without reaching it (bk_res.refusal says why). */
enum lk_code engine_bk_submit(struct engine *e, struct lk_loop *lp, struct bk_call *call,
                              const struct bk_req *req, bk_done_fn done, void *arg);
/* Whether req is within the backend's caps; when not, *why gets the
 * backend's sentence for the client (backend_ops.refusal) or NULL. */
bool engine_bk_supported(const struct engine *e, const struct bk_req *req, const char **why);
/* Compare-and-delete release in the background; done (may be NULL) gets
 * the result. Used to give back grants nobody will use (undo), and by the
 * reaper and shutdown. Counted in lockd_release_total when count is set. */
void engine_bk_release(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                       int64_t delay_ms, bool count, bk_done_fn done, void *arg);
/* Pub/sub interest in name's releases (waiters). Any thread. */
void engine_bk_watch(struct engine *e, const char *name, bool on);
/* The first holder of a result, or the lock-delay as a holder. */
void engine_holder_of(const struct bk_res *r, struct eng_holder *out);
/* The ttl_ms a grant or renewal is answered with: the backend's validity
 * (Redlock: ttl - elapsed - drift) when it is shorter than the lease's ttl
 * (r->ttl_ms, else asked_ttl_ms), so expires_at never promises more than
 * the backend knows. */
int64_t engine_answer_ttl(const struct bk_res *r, int64_t asked_ttl_ms);
void engine_holder_conv(struct eng_holder *out, const struct bk_holder *h);
/* A plain (sessionless) lease was granted here, or renewed to last ttl_ms
 * from now; it is gone (released = true: its hold time is observed). */
void engine_plain_granted(struct engine *e, const char *name, const char *lease, int64_t ttl_ms);
void engine_plain_renewed(struct engine *e, const char *name, const char *lease, int64_t ttl_ms);
void engine_plain_gone(struct engine *e, const char *name, const char *lease, bool released);
/* The janitor, every tick: drops (and uncounts) plain leases that expired. */
void engine_plain_sweep(struct engine *e, int64_t now);
/* A release answered code may have freed its name all the same: the
 * backend did not answer in time, its reply was lost with the connection
 * (LK_BACKEND_DOWN), or it was held back or lost while a restarted Redis
 * is re-asserted (LK_BACKEND_RECOVERING); its script may have run. Its
 * name's waiters here ask once, as after a release (this lockd skips its
 * own pub/sub message): the backend decides, so at most one refused ask. */
static inline bool engine_release_in_doubt(enum lk_code code)
{
    return code == LK_BACKEND_DOWN || code == LK_BACKEND_RECOVERING;
}
/* An acquire answered code (not granted): when the backend did not answer
 * in time or its reply was lost (LK_BACKEND_DOWN), its script may have run
 * and granted lease, which its client never gets; the lease is given back
 * (compare-and-delete: nobody else holds a lease lockd drew for this
 * acquire), as etcd's Mutex deletes its own key when a lock attempt fails,
 * rather than the name staying held until the lease's ttl. */
void engine_acquire_in_doubt(struct engine *e, struct lk_loop *lp, enum lk_code code,
                             const char *name, const char *lease);
/* Counts a grant in lockd_acquire_total and lockd_grants_total{mode}. */
void engine_count_grant(bool shared, int64_t limit);
/* The backend's limit for an acquire's: 0 (not given) is 1. */
static inline int64_t engine_limit_of(int64_t limit)
{
    return limit > 1 ? limit : 1;
}

/* An inspect's result as the engine reports it; *hs (freed by the caller
 * after use) holds the converted holders. */
void engine_info_of(struct engine *e, const char *name, const struct bk_res *br,
                    struct eng_info *info, struct eng_holder **hs);

/* ---- waiters.c ---- */

/* The holders of name may have changed (a grant or release here, a
 * message from another lockd): its watchers look again. Any thread. */
void watchers_kick(struct engine *e, const char *name);

/* A lease of name was renewed for ttl_ms, here or through another lockd
 * (its 'r<ttl_ms>' message). A renewal may shorten the lease: its waiters
 * and watchers here that wait for a later expiry look again at the new
 * one. Any thread. */
void waiters_renewed(struct engine *e, const char *name, int64_t ttl_ms);
/* Queues a blocking acquire: LK_AGAIN (done runs later), or LK_LOCKED
 * without calling done when max_waiters are parked already (the caller
 * tries once instead). The one place max_waiters is checked. */
enum lk_code waiters_acquire(struct engine *e, struct lk_loop *lp, const struct eng_acquire *a,
                             const char *lease, eng_done_fn done, void *arg,
                             struct eng_waiter **out);
/* A name was released (here, by the reaper, or by another lockd): the head
 * waiter tries at once. Any thread. */
void waiters_kick(struct engine *e, const char *name);
/* waiters_kick after a release that carried rider (NULL: none), which asked
 * with it: rider is not told to ask again. */
void waiters_kick_rider(struct engine *e, const char *name, struct eng_waiter *rider);
/* A release of name may carry a waiter of its queue here (BK_CAP_HANDOFF):
 * the head, or for a semaphore the first queued waiter behind those that
 * ask already (ho->after names the one right before it), now attempting,
 * its acquire in *ho; NULL when none can ride (none queued, a reader:
 * readers go in groups, a multi-lock, one failing, a mutex's head asking
 * already, or lockd draining). On the releaser's loop. */
struct eng_waiter *waiters_ride(struct engine *e, const char *name, struct bk_handoff *ho);
/* The release that carried w was answered: g is w's acquire's result, or
 * NULL when it was not asked (the release failed: w waits on; the backend
 * declined, or the waiter before it did not hold the name: a head asks
 * itself, as a kicked head, a waiter behind it waits on). doubt: the
 * release was answered in doubt (released is true then too): the hand-off
 * may have granted w, which renews its lease before anything else. On the
 * releaser's loop; w is answered on its own. */
void waiters_ride_done(struct engine *e, struct eng_waiter *w, bool released, bool doubt,
                       const struct bk_res *g);
/* Another lockd granted name (a pub/sub message): its watchers look, and a
 * queued reader asks (the name may be open to readers now); other waiters
 * wait for a release, as a grant frees nothing. */
void waiters_kick_granted(struct engine *e, const char *name);
/* True (and *holder filled) when lockd has waiters queued for name. */
bool waiters_queued(struct engine *e, const char *name, struct eng_holder *holder);
int64_t waiters_count(struct engine *e, const char *name);
/* Answers every waiter of a dead session 404, or every waiter 503 when
 * draining (session NULL). Any thread. */
void waiters_fail(struct engine *e, const char *session);
void waiters_free_all(struct engine *e);
/* Releases (name, lease) in the background (compare-and-delete, then a
 * lock-delay of delay_ms); once released, the name's waiters go. Gives back
 * grants nobody will use, and frees what the reaper and max_hold_ms take.
 * count: lockd_release_total counts it. On lp's thread. */
void waiters_release_bg(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                        int64_t delay_ms, bool count);

/* A waiting multi-lock's place in the queues (multilock.c). Its waiter
 * never asks the backend itself: fn(arg, LK_OK) means "try the whole set
 * now" (it is the head of its queue and the name was released, or its
 * holder expired), and the multi-lock then calls waiters_multi_park or
 * waiters_multi_end. Any other code means the wait is over (LK_LOCKED: the
 * deadline; LK_SESSION_NOT_FOUND, LK_SHUTTING_DOWN; LK_CANCELLED: the client
 * left, answer nothing): the waiter is out of every queue, and the
 * multi-lock frees it with waiters_multi_end. All on the waiter's loop. */
typedef void (*waiters_multi_fn)(void *arg, enum lk_code why);
/* A waiter for a multi-lock whose first try starts now (not queued yet). */
struct eng_waiter *waiters_multi_new(struct engine *e, struct lk_loop *lp, const char *session,
                                     int64_t wait_ms, waiters_multi_fn fn, void *arg);
/* The client left while the set was being tried (engine_cancel). */
bool waiters_multi_cancelled(struct engine *e, struct eng_waiter *w);
enum wm_park {
    WM_QUEUED, /* waits in name's queue: fn runs later */
    WM_AGAIN,  /* try the set again now (a release came meanwhile, or it
                * heads a queue it just joined) */
    WM_FULL,   /* max_waiters are queued: answer 409 now */
    WM_FAILED, /* its session died or lockd drains: answer *fail_code */
};
/* The set was refused by name (holder: who holds it, or NULL): w waits in
 * name's queue (moving from the queue it was in, if another). */
enum wm_park waiters_multi_park(struct engine *e, struct eng_waiter *w, const char *name,
                                const struct eng_holder *holder, enum lk_code *fail_code);
/* Takes w out of its queue and frees it; holds: the set was granted (the
 * next in that queue waits for a release). */
void waiters_multi_end(struct engine *e, struct eng_waiter *w, bool holds);
int64_t waiters_multi_waited(const struct eng_waiter *w);
bool waiters_multi_expired(const struct eng_waiter *w);

/* ---- session.c: the session table (no backend, no waiters) ---- */

bool session_alive(struct engine *e, const char *id);
/* Like session_alive; also copies the session's owner into owner. */
bool session_owner(struct engine *e, const char *id, char owner[LK_OWNER_MAX + 1]);
/* True when session id holds name (a live hold, not one being released).
 * Takes smu: never call it under wmu. */
bool session_holds(struct engine *e, const char *id, const char *name);
/* Records a grant under session id; LK_SESSION_NOT_FOUND if it died. */
enum lk_code session_add_lock(struct engine *e, const char *id, const char *name, const char *lease,
                              const char *owner, int64_t token, int64_t ttl_ms, int64_t max_hold_ms,
                              bool shared, int64_t limit) LK_WUR;
/* Reentrant re-acquire: when session id holds name in the same mode and
 * limit (a shared hold counts up; no upgrade from shared to exclusive),
 * count+1 and fill r. */
bool session_reenter(struct engine *e, const char *id, const char *name, bool shared, int64_t limit,
                     struct eng_result *r, char lease_out[LK_LEASE_LEN + 1],
                     char owner_out[LK_OWNER_MAX + 1]);

/* A client's release of (name, lease). */
enum sess_release {
    SR_UNBOUND, /* not a session lease here: release it in the backend */
    SR_KEPT,    /* reentrant: one hold less, *left holds remain, nothing to send */
    SR_LAST,    /* the last hold: release it in the backend, then session_release_end */
};
enum sess_release session_release_begin(struct engine *e, const char *name, const char *lease,
                                        int64_t *left, int64_t *token);
/* The backend answered a release that session_release_begin called SR_LAST:
 * gone (LK_OK, LK_NOT_HELD, LK_HELD_BY_OTHER) detaches the lock; anything
 * else (LK_BACKEND_DOWN) keeps it held, renewed and reported. */
void session_release_end(struct engine *e, const char *name, const char *lease, enum lk_code code);
/* A renewal succeeded: a session-bound lease takes the new TTL. Returns its
 * hold count and copies its session id (0 and nothing when not bound). */
int64_t session_note_renew(struct engine *e, const char *name, const char *lease, int64_t ttl_ms,
                           char session[LK_SESSION_LEN + 1]);

/* The locks of a session that ended or expired, to release. */
struct sess_end {
    struct sess_end *next;
    char id[LK_SESSION_LEN + 1];
    int64_t delay_ms; /* the session's lock_delay_ms (applies when it expired) */
    size_t n;
    char **names, **leases;
};
void sess_end_free(struct sess_end *se);
/* Unlinks live session id: LK_OK and *out, or LK_SESSION_NOT_FOUND. */
enum lk_code session_end(struct engine *e, const char *id, struct sess_end **out) LK_WUR;
/* Every session that missed its heartbeat by now, unlinked (a list). */
struct sess_end *session_reap_due(struct engine *e, int64_t now);
/* Every session, unlinked (shutdown). */
struct sess_end *session_end_all(struct engine *e);
size_t session_count(struct engine *e);

/* The watchdog's work: leases due for renewal, in backend-sized batches. */
struct wd_batch {
    struct wd_batch *next;
    struct bk_call call;
    struct engine *e;
    int64_t sent_ms;
    size_t n;
    struct sess_lock **locks;
    struct bk_renew_item *items;
};
/* Takes what is due (under smu); *capped gets leases whose max_hold_ms ran
 * out, to release (names and leases, n in *ncapped). */
struct wd_batch *session_watchdog_due(struct engine *e, int64_t now,
                                      char (**capped)[2][LK_NAME_MAX + 1], size_t *ncapped);
/* Applies a batch's results (renewed, lost, retry) and frees it. */
void session_watchdog_done(struct wd_batch *b);
void sessions_free_all(struct engine *e);

/* ---- janitor.c ---- */
enum lk_code janitor_start(struct engine *e) LK_WUR;
void janitor_stop(struct engine *e);

#endif
