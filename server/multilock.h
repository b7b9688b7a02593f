/*
 * multilock.h - several names taken, renewed and released as one (DESIGN.md
 * §2 "Multi-lock"): all or none, one lease for the set, one fencing token
 * per name. Each member is an ordinary lock held by that lease, so
 * /locks/{name} renews and releases it alone, and a session's watchdog
 * renews it like any other. Knows nothing of HTTP or JSON.
 *
 * Completion as in engine.h: done runs exactly once, synchronously (the call
 * returns LK_OK) or later on the calling loop's thread (LK_AGAIN); strings
 * and arrays in results are valid only during done.
 */
#ifndef LOCKD_SERVER_MULTILOCK_H
#define LOCKD_SERVER_MULTILOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/engine.h"

#define ENG_MULTI_MAX 64 /* names in one multi-lock */

struct eng_multi {
    const char *const *names; /* 1..ENG_MULTI_MAX distinct valid names (checked by the caller) */
    size_t nnames;
    int64_t ttl_ms;
    int64_t wait_ms;     /* 0 = try once */
    const char *session; /* NULL = none */
    const char *owner;   /* "" = none */
    int64_t max_hold_ms; /* -1 = config default */
};

struct eng_multi_result {
    enum lk_code code;
    /* LK_OK: the lease, and each name's token in the order asked */
    const char *lease;
    const char *const *names;
    const int64_t *tokens;
    size_t n;
    int64_t ttl_ms;
    int64_t expires_at_ms; /* wall clock */
    const char *session;   /* NULL = none */
    const char *owner;
    /* LK_LOCKED: a name that refused the set, and who holds it */
    const char *name;
    struct eng_holder holder;
    bool has_holder;
    int64_t waited_ms;
    int64_t retry_ms; /* LK_BACKEND_RECOVERING */
};
typedef void (*eng_multi_fn)(void *arg, const struct eng_multi_result *r);

/* Takes every name under one new lease, or none. With wait_ms > 0 it may
 * wait (never holding a name while it waits, so overlapping sets cannot
 * deadlock): *waiter is then a handle for engine_cancel(), valid until done
 * runs. LK_LOCKED when refused (nothing held by this request), also
 * LK_SESSION_NOT_FOUND, LK_SHUTTING_DOWN, LK_BACKEND_DOWN. */
enum lk_code engine_multi_acquire(struct engine *e, struct lk_loop *lp, const struct eng_multi *m,
                                  eng_multi_fn done, void *arg, struct eng_waiter **waiter);

/* Renew (renew=true; ttl_ms <= 0: what each lease was last given) or
 * release the members of a set held by lease. LK_OK when at least one was
 * still held by it: locks lists those, lost the others. Else LK_NOT_HELD,
 * or LK_HELD_BY_OTHER (holder: one who holds a member) when no member was;
 * LK_BACKEND_DOWN when the backend could not answer for some member. */
struct eng_multi_set {
    enum lk_code code;
    const char *const *locks;
    size_t nlocks;
    const char *const *lost;
    size_t nlost;
    int64_t ttl_ms;        /* renew: the shortest ttl granted */
    int64_t expires_at_ms; /* renew */
    struct eng_holder holder;
    bool has_holder;
    int64_t retry_ms;
};
typedef void (*eng_multi_set_fn)(void *arg, const struct eng_multi_set *r);
enum lk_code engine_multi_renew(struct engine *e, struct lk_loop *lp, const char *const *names,
                                size_t n, const char *lease, int64_t ttl_ms, eng_multi_set_fn done,
                                void *arg);
enum lk_code engine_multi_release(struct engine *e, struct lk_loop *lp, const char *const *names,
                                  size_t n, const char *lease, eng_multi_set_fn done, void *arg);

#endif
