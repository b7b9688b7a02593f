/*
 * backend.h - the storage interface behind the engine: a table of operations
 * plus an opaque state pointer (like hiredis adapters). Implementations:
 * backend_memory.c, backend_redis.c (and later backend_redlock.c).
 *
 * Completion contract, for every operation that takes a callback:
 *  - the callback runs exactly once;
 *  - either synchronously, before the call returns (the call returns LK_OK),
 *    or later on the thread that owns `lp` (the call returns LK_AGAIN);
 *  - strings in the reply are only valid during the callback.
 * A backend knows nothing of sessions, waiters or HTTP. A backend that cannot
 * answer reports LK_BACKEND_DOWN: never a grant on doubt.
 */
#ifndef LOCKD_SERVER_BACKEND_H
#define LOCKD_SERVER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/util.h"

struct lk_loop;
struct lk_config;

struct bk_holder {
    char owner[LK_OWNER_MAX + 1];
    int64_t fencing_token;
    int64_t expires_in_ms; /* PTTL of the holder's lease (or of the lock-delay) */
    bool session_bound;
    bool lock_delay; /* nobody holds it, but a lock-delay window is running */
};

struct bk_acquire {
    const char *name;
    const char *lease; /* LK_LEASE_LEN hex chars */
    const char *owner; /* "" when none */
    int64_t ttl_ms;
    bool session_bound;
    bool wait; /* a waiter asks: it, or lockd's queue behind it, must hear of the release */
};

struct bk_reply {
    /* LK_OK, LK_LOCKED (acquire), LK_NOT_HELD / LK_HELD_BY_OTHER (renew,
     * release), LK_BACKEND_DOWN, LK_UNSUPPORTED. */
    enum lk_code code;
    int64_t fencing_token;   /* OK: the lease's token */
    int64_t ttl_ms;          /* OK (acquire, renew): the ttl the lease now has */
    struct bk_holder holder; /* LOCKED / HELD_BY_OTHER: who holds it now */
};

typedef void (*bk_done_fn)(void *arg, const struct bk_reply *r);

struct bk_info {
    enum lk_code code; /* LK_OK or LK_BACKEND_DOWN */
    bool held;
    struct bk_holder holder; /* when held, or lock_delay when only delayed */
};

typedef void (*bk_info_fn)(void *arg, const struct bk_info *info);

struct bk_entry {
    const char *name;
    struct bk_holder holder;
};

/* next_cursor NULL at the end of the listing. */
typedef void (*bk_list_fn)(void *arg, enum lk_code code, const struct bk_entry *entries, size_t n,
                           const char *next_cursor);

/* Watchdog batch: the caller owns items until done runs; the backend fills
 * result (LK_OK, LK_NOT_HELD, LK_HELD_BY_OTHER, LK_BACKEND_DOWN) per item. */
struct bk_renew_item {
    const char *name;
    const char *lease;
    int64_t ttl_ms;
    enum lk_code result;
};

typedef void (*bk_batch_fn)(void *arg, struct bk_renew_item *items, size_t n);

struct bk_node {
    char addr[128];
    bool up;
    char reason[128];
};

/* Release notifications from other lockd processes (Redis pub/sub). fn runs on
 * a backend-owned thread; it must only hand the name to its own loop. */
typedef void (*bk_release_fn)(void *arg, const char *name);

struct backend_ops {
    const char *name; /* "memory", "redis", "redlock" */

    /* Prepares per-loop resources (e.g. one async connection per loop). Called
     * on lp's thread before it serves requests. */
    enum lk_code (*attach)(void *bk, struct lk_loop *lp) LK_WUR;
    /* Drops them; on lp's thread after it stopped serving. */
    void (*detach)(void *bk, struct lk_loop *lp);

    /* Grants a->lease if the name is free (and out of any lock-delay), with a
     * fencing token greater than every token granted for the name before. */
    enum lk_code (*acquire)(void *bk, struct lk_loop *lp, const struct bk_acquire *a,
                            bk_done_fn done, void *arg);
    /* Extends lease to ttl_ms if, and only if, it still holds the name.
     * ttl_ms 0 means the ttl the lease was last given (so backends store it). */
    enum lk_code (*renew)(void *bk, struct lk_loop *lp, const char *name, const char *lease,
                          int64_t ttl_ms, bk_done_fn done, void *arg);
    /* Deletes the lock if lease holds it (compare-and-delete) and tells other
     * lockd processes. delay_ms > 0 keeps the name unacquirable that long. */
    enum lk_code (*release)(void *bk, struct lk_loop *lp, const char *name, const char *lease,
                            int64_t delay_ms, bk_done_fn done, void *arg);
    enum lk_code (*inspect)(void *bk, struct lk_loop *lp, const char *name, bk_info_fn done,
                            void *arg);
    /* Held locks whose names start with prefix, about limit per page, from an
     * opaque cursor ("" = start). */
    enum lk_code (*list)(void *bk, struct lk_loop *lp, const char *prefix, const char *cursor,
                         size_t limit, bk_list_fn done, void *arg);
    /* Renews many leases in few round trips (the watchdog). */
    enum lk_code (*renew_many)(void *bk, struct lk_loop *lp, struct bk_renew_item *items, size_t n,
                               bk_batch_fn done, void *arg);
    /* Drops expired state that nothing else would (may be NULL). Called by
     * the janitor thread every tick; must hold its locks only briefly. */
    void (*sweep)(void *bk);
    /* code LK_OK when the backend answers (Redlock: a quorum). */
    enum lk_code (*ping)(void *bk, struct lk_loop *lp, bk_done_fn done, void *arg);
    /* Last known state of each node, for /readyz and metrics. Any thread. */
    size_t (*nodes)(void *bk, struct bk_node *out, size_t max);

    /* Cross-process release notifications (may be NULL: memory). Any thread. */
    void (*set_release_hook)(void *bk, bk_release_fn fn, void *arg);
    void (*watch)(void *bk, const char *name, bool on);

    void (*free)(void *bk);
};

struct backend {
    const struct backend_ops *ops;
    void *state;
};

/* Builds the backend the configuration selects. On failure writes one line to
 * err and returns LK_INVALID (bad config) or LK_BACKEND_DOWN. */
enum lk_code backend_open(const struct lk_config *cfg, struct backend *out, char *err,
                          size_t errlen) LK_WUR;

enum lk_code backend_memory_new(const struct lk_config *cfg, struct backend *out) LK_WUR;
enum lk_code backend_redis_new(const struct lk_config *cfg, struct backend *out, char *err,
                               size_t errlen) LK_WUR;

#endif
