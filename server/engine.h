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

#include "server/backend.h"
#include "server/util.h"

struct lk_config;
struct lk_loop;
struct engine;
struct eng_waiter;

struct eng_acquire {
    const char *name;
    int64_t ttl_ms;
    int64_t wait_ms;     /* 0 = try once */
    const char *session; /* NULL = none */
    const char *owner;   /* "" = none */
    bool reentrant;
    int64_t max_hold_ms; /* -1 = config default */
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
    int64_t count;           /* reentrant hold count (1 without); release: what is left */
    struct bk_holder holder; /* LK_LOCKED / LK_HELD_BY_OTHER */
    bool has_holder;
    int64_t waited_ms;
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
struct engine *engine_new(const struct lk_config *cfg, struct backend bk);
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
/* Inspect: done gets the backend's view; waiters counts this lockd's queue. */
typedef void (*eng_info_fn)(void *arg, const struct bk_info *info, int64_t waiters);
enum lk_code engine_inspect(struct engine *e, struct lk_loop *lp, const char *name,
                            eng_info_fn done, void *arg);
enum lk_code engine_list(struct engine *e, struct lk_loop *lp, const char *prefix,
                         const char *cursor, size_t limit, bk_list_fn done, void *arg);
/* Acquires queued for name in this lockd. Any thread. */
int64_t engine_waiters(struct engine *e, const char *name);
enum lk_code engine_ping(struct engine *e, struct lk_loop *lp, bk_done_fn done, void *arg);
size_t engine_nodes(struct engine *e, struct bk_node *out, size_t max);
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
