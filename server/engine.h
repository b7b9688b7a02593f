/*
 * engine.h - the lock engine: leases, fencing, sessions, waiters, watchdog
 * and reaper on top of one backend. Knows nothing of HTTP or JSON.
 *
 * Every operation completes through its callback exactly once: synchronously
 * (the call returns LK_OK) or later on the calling loop's thread (returns
 * LK_AGAIN). Strings in results are valid only during the callback.
 * Operations may be called from any HTTP loop thread.
 */
#ifndef LOCKD_SERVER_ENGINE_H
#define LOCKD_SERVER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/util.h"

struct backend;
struct lk_config;
struct lk_loop;
struct engine;
struct eng_waiter;

/* Who holds a name, as the engine reports it (api/ sees no bk_* type). */
struct eng_holder {
    char owner[LK_OWNER_MAX + 1];
    int64_t fencing_token;
    int64_t expires_in_ms; /* the holder's lease, or the lock-delay left */
    bool session_bound;
    bool shared;
    bool lock_delay; /* nobody holds it, but a lock-delay window is running */
};

struct eng_acquire {
    const char *name;
    int64_t ttl_ms;
    int64_t wait_ms;     /* 0 = try once */
    const char *session; /* NULL = none */
    const char *owner;   /* "" = none */
    bool reentrant;
    int64_t max_hold_ms; /* -1 = config default */
    bool shared;         /* mode shared: a reader of a reader-writer lock */
    int64_t limit;       /* > 1: a semaphore of limit slots; 0 or 1: not */
};

struct eng_result {
    enum lk_code code;
    const char *name;
    const char *lease;
    int64_t fencing_token;
    int64_t ttl_ms;
    int64_t expires_at_ms; /* wall clock */
    const char *session;   /* NULL = none */
    const char *owner;
    int64_t count;            /* reentrant hold count (1 without); release: what is left */
    struct eng_holder holder; /* LK_LOCKED / LK_HELD_BY_OTHER */
    bool has_holder;
    int64_t waited_ms;
    bool shared;         /* OK acquire: the mode granted */
    int64_t limit;       /* LK_LIMIT_MISMATCH: the limit in force */
    bool holder_is_self; /* LK_LOCKED: the asking session holds the name itself */
    int64_t retry_ms;    /* LK_BACKEND_RECOVERING: when to ask again (Retry-After) */
    /* LK_UNSUPPORTED: why, the backend's sentence (lives as long as the
     * program), or NULL for errors.c's message */
    const char *message;
};

typedef void (*eng_done_fn)(void *arg, const struct eng_result *r);

struct eng_session_view {
    enum lk_code code;
    const char *session;
    int64_t ttl_ms;
    int64_t expires_at_ms;
    const char *owner;
    const char *const *locks;
    size_t nlocks;
    const char *const *lost;
    size_t nlost;
};

typedef void (*eng_session_fn)(void *arg, const struct eng_session_view *v);

/* Creates the engine over an opened backend (ownership of bk moves in). */
struct engine *engine_new(const struct lk_config *cfg, const struct backend *bk);
/* Starts the janitor thread (watchdog, reaper). */
enum lk_code engine_start(struct engine *e) LK_WUR;
/* Stops the janitor, frees everything. No operation may be running. */
void engine_free(struct engine *e);

/* Backend per-loop resources; on lp's thread. */
enum lk_code engine_attach(struct engine *e, struct lk_loop *lp) LK_WUR;
void engine_detach(struct engine *e, struct lk_loop *lp);

/* Acquire. With wait_ms > 0 the request may queue: *waiter is then set to a
 * handle valid until the callback runs; engine_cancel() withdraws it. */
enum lk_code engine_acquire(struct engine *e, struct lk_loop *lp, const struct eng_acquire *a,
                            eng_done_fn done, void *arg, struct eng_waiter **waiter);
/* The client went away: the callback will not run. If the waiter was granted
 * in the same instant, the grant is released. On the waiter's loop. */
void engine_cancel(struct engine *e, struct eng_waiter *w);

/* ttl_ms <= 0: the ttl the lease was last given (session leases), else default. */
enum lk_code engine_renew(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                          int64_t ttl_ms, eng_done_fn done, void *arg);
enum lk_code engine_release(struct engine *e, struct lk_loop *lp, const char *name,
                            const char *lease, eng_done_fn done, void *arg);
/* An operator's force-unlock: every holder of name goes, no lock-delay.
 * LK_OK with fencing_token the highest released, LK_NOT_HELD, LK_UNSUPPORTED
 * or LK_BACKEND_DOWN. Counted in lockd_forced_releases_total when released. */
enum lk_code engine_force_release(struct engine *e, struct lk_loop *lp, const char *name,
                                  eng_done_fn done, void *arg);
/* Inspect: the backend's view of name plus this lockd's queue. */
struct eng_info {
    enum lk_code code; /* LK_OK or LK_BACKEND_DOWN */
    bool held;
    struct eng_holder holder; /* the first holder when held, or lock_delay when only delayed */
    const struct eng_holder *holders; /* the holders, newest token first, at most 100 */
    size_t nholders;
    size_t total_holders; /* how many hold it */
    int64_t limit;        /* the limit in force when held */
    int64_t waiters;      /* acquires queued for it in this lockd */
    bool has_index;       /* the backend keeps an index (watching) */
    int64_t index;        /* grows whenever the holders change (DESIGN.md §Watching) */
};
typedef void (*eng_info_fn)(void *arg, const struct eng_info *info);
enum lk_code engine_inspect(struct engine *e, struct lk_loop *lp, const char *name,
                            eng_info_fn done, void *arg);

/* Watch: answers (through done, like an inspect) once name's index differs
 * from index, or after wait_ms with the current view (the same index). An
 * index that differs already answers at once. LK_AGAIN: *waiter is a handle
 * valid until done runs; engine_cancel() withdraws it (the client left).
 * LK_UNSUPPORTED (done not called) when the backend keeps no index. On
 * lp's thread; done runs there. */
enum lk_code engine_watch(struct engine *e, struct lk_loop *lp, const char *name, int64_t index,
                          int64_t wait_ms, eng_info_fn done, void *arg, struct eng_waiter **waiter);
bool engine_has_index(const struct engine *e);

struct eng_entry {
    const char *name;
    struct eng_holder holder;
    size_t nholders; /* how many hold it */
    int64_t limit;   /* the limit in force */
    bool has_index;
    int64_t index;
};
/* code LK_OK, LK_BAD_CURSOR or LK_BACKEND_DOWN; next_cursor NULL at the end. */
typedef void (*eng_list_fn)(void *arg, enum lk_code code, const struct eng_entry *entries, size_t n,
                            const char *next_cursor);
enum lk_code engine_list(struct engine *e, struct lk_loop *lp, const char *prefix,
                         const char *cursor, size_t limit, eng_list_fn done, void *arg);
/* Acquires queued for name in this lockd. Any thread. */
int64_t engine_waiters(struct engine *e, const char *name);
/* code LK_OK when the backend takes writes. */
typedef void (*eng_ping_fn)(void *arg, enum lk_code code);
enum lk_code engine_ping(struct engine *e, struct lk_loop *lp, eng_ping_fn done, void *arg);

struct eng_node {
    char addr[128];
    bool up;
    char reason[128];
    int64_t errors;   /* backend calls that failed on it (lockd_backend_errors_total) */
    int64_t restarts; /* lockd_backend_restarts_total: a new Redis process found there */
    bool recovering;  /* re-asserting leases after a restart, or in its grace */
};
size_t engine_nodes(struct engine *e, struct eng_node *out, size_t max);
const char *engine_backend_name(const struct engine *e);

/* Sessions. ttl_ms <= 0 = config default; lock_delay_ms >= 0. */
enum lk_code engine_session_create(struct engine *e, int64_t ttl_ms, const char *owner,
                                   int64_t lock_delay_ms, eng_session_fn done, void *arg);
/* Heartbeat (touch=true) or look (touch=false). */
enum lk_code engine_session_get(struct engine *e, const char *id, bool touch, eng_session_fn done,
                                void *arg);
/* Ends the session, releasing its locks; the view lists them in locks. */
enum lk_code engine_session_end(struct engine *e, struct lk_loop *lp, const char *id,
                                eng_session_fn done, void *arg);

/* SIGTERM: refuse new acquires and sessions; answer waiters 503. Any thread. */
void engine_drain(struct engine *e);
bool engine_draining(const struct engine *e);
/* Number of live sessions (drain waits for 0). */
size_t engine_session_count(struct engine *e);
/* At exit: releases session locks if release_on_shutdown (blocking, bounded). */
void engine_shutdown(struct engine *e);

#endif
