/*
 * engine_int.h - the engine's private state, shared by engine.c (lock
 * operations), waiters.c (blocking acquires) and session.c (sessions,
 * watchdog, reaper). Not for api/.
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

#include "server/engine.h"
#include "server/hash.h"
#include "server/heap.h"

struct session;

/* A lock held under a session through this lockd: the watchdog renews it.
 * One allocation sized to its name and owner, which never change. */
struct sess_lock {
    int64_t token;
    int64_t ttl_ms;
    int64_t count;         /* reentrant holds */
    int64_t hold_until_ms; /* max_hold_ms deadline (monotonic); 0 = unbounded */
    int64_t expires_ms;    /* lease expiry as of our last successful renewal */
    struct session *s;
    UT_hash_handle hh; /* engine->held, by name */
    UT_hash_handle sh; /* session->locks, by name */
    bool dead;         /* released or lost: freed when popped off the heap */
    bool in_flight;    /* part of a watchdog batch right now */
    bool in_heap;
    char lease[LK_LEASE_LEN + 1];
    char name[]; /* the name, then the owner: lk_pair_put */
};

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

struct engine {
    const struct lk_config *cfg;
    struct backend bk;
    atomic_bool draining;

    pthread_mutex_t wmu;
    struct wqueue *queues;

    pthread_mutex_t smu;
    struct session *sessions;
    struct sess_lock *held;
    size_t nsessions;
    struct heap sess_heap;  /* (deadline, session) */
    struct heap renew_heap; /* (next renewal, sess_lock) */

    struct lk_loop *jloop; /* janitor: watchdog and reaper */
    pthread_t jthread;
    bool jstarted;
    ev_timer jtick;
};

/* waiters.c */
/* Queues a blocking acquire: LK_AGAIN (done runs later), or LK_LOCKED
 * without calling done when max_waiters are parked already (the caller
 * tries once instead). The one place max_waiters is checked. */
enum lk_code waiters_acquire(struct engine *e, struct lk_loop *lp, const struct eng_acquire *a,
                             const char *lease, eng_done_fn done, void *arg,
                             struct eng_waiter **out);
/* A name was released (here, by the reaper, or by another lockd): the head
 * waiter tries at once. Any thread. */
void waiters_kick(struct engine *e, const char *name);
/* True (and *holder filled) when lockd has waiters queued for name. */
bool waiters_queued(struct engine *e, const char *name, struct bk_holder *holder);
int64_t waiters_count(struct engine *e, const char *name);
/* Answers every waiter of a dead session 404, or every waiter 503 when
 * draining (session NULL). Any thread. */
void waiters_fail(struct engine *e, const char *session);
void waiters_free_all(struct engine *e);

/* session.c */
/* Records a grant under session id; LK_SESSION_NOT_FOUND if it died. */
enum lk_code session_add_lock(struct engine *e, const char *id, const char *name, const char *lease,
                              const char *owner, int64_t token, int64_t ttl_ms,
                              int64_t max_hold_ms);
/* Reentrant re-acquire: when session id holds name, count+1 and fill r. */
bool session_reenter(struct engine *e, const char *id, const char *name, struct eng_result *r,
                     char lease_out[LK_LEASE_LEN + 1], char owner_out[LK_OWNER_MAX + 1]);
bool session_alive(struct engine *e, const char *id);
/* Client release of a session lease: returns true with *left = holds left
 * when the lease is session-bound and still held more than once (nothing to
 * do in the backend); false otherwise (detaches it when count reaches 0). */
bool session_release_hold(struct engine *e, const char *name, const char *lease, int64_t *left,
                          int64_t *token);
/* A renewal succeeded: a session-bound lease takes the new TTL. Returns its
 * hold count and copies its session id (0 and nothing when not bound). */
int64_t session_note_renew(struct engine *e, const char *name, const char *lease, int64_t ttl_ms,
                           char session[LK_SESSION_LEN + 1]);
enum lk_code janitor_start(struct engine *e);
void janitor_stop(struct engine *e);
void sessions_free_all(struct engine *e);

/* engine.c: fire-and-forget release used by cancelled waiters and reaper. */
void engine_release_bg(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                       int64_t delay_ms);

#endif
