/*
 * backend.h - the storage contract behind the engine: one request type, one
 * result type and a table of operations plus an opaque state pointer (like
 * hiredis adapters). Implementations: backend_memory.c, backend_redis.c,
 * backend_redlock.c (a quorum over N Redis lock layers), redis_sentinel.c (a
 * discovery step in front of one node), redis_cluster.c (a slot router in
 * front of one lock layer per primary).
 * docs/architecture.md.
 *
 * Completion contract of submit():
 *  - done runs exactly once;
 *  - either synchronously, before submit returns (it returns LK_OK), or later
 *    on the thread that owns `lp` (it returns LK_AGAIN);
 *  - everything the result points at is valid only during done;
 *  - the request's strings and items must stay valid until done runs.
 * A backend knows nothing of sessions, waiters or HTTP. A backend that cannot
 * answer reports LK_BACKEND_DOWN: never a grant on doubt. Only the engine
 * calls submit (engine_bk_submit, server/engine_bk.c): it times every call
 * and counts errors per node.
 */
#ifndef LOCKD_SERVER_BACKEND_H
#define LOCKD_SERVER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/util.h"

struct lk_loop;
struct lk_config;

enum bk_op {
    BK_ACQUIRE,    /* grant lease if the mode and limit allow, out of any lock-delay */
    BK_RENEW,      /* extend lease to ttl_ms if, and only if, it still holds the name */
    BK_RELEASE,    /* compare-and-delete lease; delay_ms > 0 starts a lock-delay */
    BK_INSPECT,    /* the holders of name */
    BK_LIST,       /* held names starting with prefix, a page from cursor */
    BK_RENEW_MANY, /* the watchdog: items[], a result per item */
    BK_PING,       /* LK_OK when the backend takes writes (Redlock: a quorum) */
    /* An operator's force-unlock: drop every holder of name whatever its
     * lease, with no lock-delay after it (BK_CAP_FORCE). LK_OK with
     * fencing_token = the highest token released, or LK_NOT_HELD. Wakes
     * waiters of other lockd processes as a release does. */
    BK_FORCE_RELEASE,
    /* A multi-lock (BK_CAP_MULTI): names[0..nnames) all granted under one
     * lease (exclusive, limit 1) or none, in one step that nobody sees half
     * done. LK_OK with tokens[i] for names[i]; else the code a BK_ACQUIRE of
     * names[blocked] would answer (LK_LOCKED with its holder or lock-delay,
     * LK_LIMIT_MISMATCH) and nothing held. A backend that can do it for
     * some sets only (a Redis Cluster: names of one slot) answers
     * LK_UNSUPPORTED for the others; the engine then takes the names one by
     * one (server/multilock.c). */
    BK_ACQUIRE_MULTI,
    BK_OP_COUNT
};

enum bk_mode { BK_EXCLUSIVE = 0, BK_SHARED = 1 };

/* Capabilities a backend declares; the engine refuses (LK_UNSUPPORTED)
 * what its backend cannot do before it submits anything. */
#define BK_CAP_SHARED 0x1u /* mode BK_SHARED */
#define BK_CAP_LIMIT 0x2u  /* limit > 1 (semaphores) */
#define BK_CAP_FLOOR 0x4u  /* fence_floor honoured */
#define BK_CAP_FORCE 0x8u  /* BK_FORCE_RELEASE */
#define BK_CAP_INDEX 0x10u /* bk_res.index and bk_entry.index (watching) */
#define BK_CAP_MULTI 0x20u /* BK_ACQUIRE_MULTI */

struct bk_renew_item {
    const char *name;
    const char *lease;
    int64_t ttl_ms;
    enum lk_code result; /* filled: LK_OK, LK_NOT_HELD, LK_HELD_BY_OTHER, LK_BACKEND_DOWN */
};

/* bk_req.more: readers granted together, in one call (a capability as
 * BK_CAP_* above, defined here beside what it takes). */
#define BK_CAP_GROUP 0x40u

/* One more shared holder granted with an acquire (bk_req.more). */
struct bk_grant_item {
    const char *lease; /* LK_LEASE_LEN hex chars */
    const char *owner; /* "" when none */
    int64_t ttl_ms;
    bool session_bound;
    int64_t fencing_token; /* filled when the acquire answers LK_OK */
};

/* bk_req.handoff: a release hands the name to a waiter in the same backend
 * call (BK_CAP_HANDOFF): BK_RELEASE (delay_ms 0) with it also runs, in one
 * step after a release that succeeded, the BK_ACQUIRE this describes (wait
 * set; no fence floor, no more). The backend may decline it, or not ask
 * (after, below): then bk_res.handoff is NULL and nothing was asked for the
 * waiter. */
#define BK_CAP_HANDOFF 0x80u

struct bk_handoff {
    const char *lease; /* LK_LEASE_LEN hex chars */
    const char *owner; /* "" when none */
    enum bk_mode mode;
    int64_t limit;
    int64_t ttl_ms;
    bool session_bound;
    /* "" or the lease of the waiter queued right before this one, which
     * still asks: this one is then granted only if that lease holds the
     * name when the hand-off runs (a later waiter never overtakes it) */
    char after[LK_LEASE_LEN + 1];
};

struct bk_req {
    enum bk_op op;
    const char *name;  /* all but LIST, RENEW_MANY, PING */
    const char *lease; /* ACQUIRE, RENEW, RELEASE: LK_LEASE_LEN hex chars */
    const char *owner; /* ACQUIRE: "" when none */
    enum bk_mode mode; /* ACQUIRE */
    /* ACQUIRE: holders allowed at once. 1: a mutex (BK_EXCLUSIVE) or a
     * reader-writer lock (BK_SHARED: any number of shared holders, or one
     * exclusive holder). N > 1: a semaphore of N slots (mode BK_EXCLUSIVE).
     * While anyone holds the name every acquire must ask the limit in force,
     * else LK_LIMIT_MISMATCH (bk_res.limit names it). A shared acquire is
     * refused while an exclusive waiter is known to the backend (writers are
     * not starved). */
    int64_t limit;
    int64_t ttl_ms;   /* ACQUIRE; RENEW: 0 = the ttl the lease was last given */
    int64_t delay_ms; /* RELEASE: lock-delay (Chubby) after it, 0 = none */
    /* ACQUIRE: the token granted must exceed it (Redlock's write-back of the
     * majority's highest counter); 0 = no floor. INSPECT (the Redis lock
     * layer's): the name's fence counter is first raised to at least it
     * (Redlock keeps its nodes' counters level, backend_redlock.c). */
    int64_t fence_floor;
    bool session_bound; /* ACQUIRE: shown to inspectors */
    /* ACQUIRE: a waiter asks; it (or lockd's queue) must hear of the release.
     * INSPECT: a watcher asks; lockd must hear (release hook) of the next
     * change of the name's holders made through any lockd. */
    bool wait;
    /* ACQUIRE, mode BK_SHARED with limit 1 only (BK_CAP_GROUP): nmore more
     * shared holders granted with this one, all or none, in the same
     * backend call (a release hands a reader-writer lock to every shared
     * waiter queued before the next exclusive one at once). On LK_OK each
     * item's fencing_token is filled, in item order, each greater than the
     * one before it and than the request's own. The caller owns more until
     * done runs. */
    struct bk_grant_item *more;
    size_t nmore;
    /* RELEASE (BK_CAP_HANDOFF): the waiter to grant after it, or NULL; the
     * caller owns it until done runs */
    const struct bk_handoff *handoff;
    /* LIST */
    const char *prefix;
    const char *cursor; /* "" = from the start; opaque otherwise */
    size_t count;       /* about this many per page */
    /* RENEW_MANY: the caller owns items until done runs */
    struct bk_renew_item *items;
    size_t nitems;
    /* ACQUIRE_MULTI (with lease, owner, ttl_ms, session_bound, wait): 1 to
     * 64 distinct names, owned by the caller until done runs */
    const char *const *names;
    size_t nnames;
};

struct bk_holder {
    char owner[LK_OWNER_MAX + 1];
    int64_t fencing_token;
    int64_t expires_in_ms; /* PTTL of the holder's lease */
    bool session_bound;
    enum bk_mode mode;
};

/* What one node said, for quorum backends and per-node metrics. A backend
 * of one node may leave nodes empty: the engine then charges node 0. */
struct bk_node_result {
    int node; /* index into what nodes() lists */
    enum lk_code code;
};

struct bk_entry {
    const char *name;
    struct bk_holder holder; /* one of its holders (the newest, or the last to expire) */
    size_t nholders;         /* how many hold it */
    int64_t limit;           /* the limit in force */
    int64_t index;           /* as bk_res.index */
};

struct bk_res {
    /* LK_OK; LK_LOCKED (acquire); LK_NOT_HELD / LK_HELD_BY_OTHER (renew,
     * release); LK_BAD_CURSOR (list); LK_LIMIT_MISMATCH; LK_UNSUPPORTED;
     * LK_BACKEND_DOWN. */
    enum lk_code code;
    int64_t fencing_token; /* OK acquire/renew: the lease's; release: the one released */
    int64_t ttl_ms;        /* OK acquire/renew: the ttl the lease now has */
    /* OK acquire/renew: how long from the request's start the result is
     * known to hold (Redlock: ttl - elapsed - drift); -1 when not computed. */
    int64_t validity_ms;
    /* OK acquire of a semaphore's slot (limit > 1): the backend counted its
     * holders with this grant and a slot is still free, so the next waiter
     * may ask now (waiters.c). false: full, or not said. */
    bool room;
    /* Who holds the name (LOCKED, HELD_BY_OTHER, INSPECT), newest token
     * first; nholders 0 = free. delay_ms > 0: nobody holds it but a
     * lock-delay runs that much longer. */
    const struct bk_holder *holders;
    size_t nholders;
    int64_t delay_ms;
    /* LIMIT_MISMATCH, INSPECT, LOCKED: the limit in force (0 when free). */
    int64_t limit;
    /* INSPECT: every holder's count (nholders may list fewer, at most 100). */
    size_t total_holders;
    /* INSPECT (BK_CAP_INDEX): below 2^53, greater after every change of the
     * name's holders (grant, release, expiry, forced release), the same
     * otherwise (renewals), the same for every lockd on this backend. A
     * name the backend no longer remembers may answer a lower one (0).
     * Redlock: the majority's view (backend_redlock.c, majority_index). */
    int64_t index;
    /* INSPECT: > 0, a holder that some node still lists expires in this
     * many ms, view or not (Redlock: the index may not move before every
     * node let an expired reader go, majority_index); a watcher asks again
     * then. 0: the view's holders' expiries say when. */
    int64_t recheck_ms;
    /* LIST */
    const struct bk_entry *entries;
    size_t nentries;
    const char *next_cursor; /* NULL at the end */
    /* RENEW_MANY: the request's items, results filled */
    struct bk_renew_item *items;
    size_t nitems;
    const struct bk_node_result *nodes;
    size_t nnodes;
    /* ACQUIRE_MULTI: OK: the token of each name, in the request's order;
     * refused: blocked is the index of the name the other fields describe */
    const int64_t *tokens;
    size_t blocked;
    /* LK_BACKEND_DOWN because Redis answered an error: its text, else NULL
     * (the cluster router follows MOVED, ASK, TRYAGAIN and CLUSTERDOWN).
     * LK_UNSUPPORTED: why, backend_ops.refusal's sentence, or NULL. */
    const char *refusal;
    /* RELEASE with bk_req.handoff: the waiter's acquire, as a BK_ACQUIRE
     * would answer it, when it ran (the release answered LK_OK); NULL when
     * it did not. */
    const struct bk_res *handoff;
};

typedef void (*bk_done_fn)(void *arg, const struct bk_res *r);

struct bk_node {
    char addr[128];
    bool up;
    char reason[128];
    int64_t restarts; /* times it turned out to be a new Redis process (issue 25) */
    bool recovering;  /* its leases are being re-asserted, or its restart grace runs */
};

/* What another lockd process's message on a name's channel tells. */
enum bk_news {
    BK_NEWS_RELEASED, /* a release (or anything else: its waiters look again) */
    BK_NEWS_GRANTED,  /* a grant: it frees nothing, watchers look again */
    BK_NEWS_SHORTER,  /* a renewal left a holder ttl_ms: it ends sooner */
};

/* Release notifications from other lockd processes (Redis pub/sub). fn runs on
 * a backend-owned thread; it must only hand the name to its own loop.
 * ttl_ms: BK_NEWS_SHORTER's new ttl, else 0. */
typedef void (*bk_release_fn)(void *arg, const char *name, enum bk_news what, int64_t ttl_ms);

struct backend_ops {
    const char *name; /* "memory", "redis", later "redlock", "cluster", "sentinel" */
    unsigned caps;    /* BK_CAP_* */

    /* Prepares per-loop resources (e.g. one async connection per loop). Called
     * on lp's thread before it serves requests. */
    enum lk_code (*attach)(void *bk, struct lk_loop *lp) LK_WUR;
    /* Drops them; on lp's thread after it stopped serving. */
    void (*detach)(void *bk, struct lk_loop *lp);

    /* Every operation (see the completion contract above). Fencing: a grant's
     * token is greater than every token granted for the name before, and
     * greater than req->fence_floor. */
    enum lk_code (*submit)(void *bk, struct lk_loop *lp, const struct bk_req *req, bk_done_fn done,
                           void *arg);

    /* Drops expired state that nothing else would (may be NULL). Called by
     * the janitor thread every tick; must hold its locks only briefly. */
    void (*sweep)(void *bk);
    /* Last known state of each node, for /readyz and metrics. Any thread. */
    size_t (*nodes)(void *bk, struct bk_node *out, size_t max);

    /* Cross-process release notifications (may be NULL: memory). Any thread. */
    void (*set_release_hook)(void *bk, bk_release_fn fn, void *arg);
    void (*watch)(void *bk, const char *name, bool on);

    void (*free)(void *bk);

    /* Why an acquire its caps lack is refused: one sentence for the client
     * (the 400's message, carried as bk_res.refusal), a string that lives
     * as long as the program; NULL (or no function) for errors.c's. */
    const char *(*refusal)(const struct bk_req *req);
};

struct backend {
    const struct backend_ops *ops;
    void *state;
};

/* A listing cursor of a backend made of parts (the cluster's primaries in
 * slot order, the nodes Redlock walks): '<k>.<part k's own cursor>', k in
 * decimal as "%zu." writes it. True with *k (< n) and *inner (borrowed
 * from cursor) when cursor is one, false otherwise (LK_BAD_CURSOR). Pure. */
bool backend_cursor_split(const char *cursor, size_t n, size_t *k, const char **inner);

/* Builds the backend the configuration selects. On failure writes one line to
 * err and returns LK_INVALID (bad config) or LK_BACKEND_DOWN. */
enum lk_code backend_open(const struct lk_config *cfg, struct backend *out, char *err,
                          size_t errlen) LK_WUR;

enum lk_code backend_memory_new(const struct lk_config *cfg, struct backend *out) LK_WUR;
enum lk_code backend_redis_new(const struct lk_config *cfg, struct backend *out, char *err,
                               size_t errlen) LK_WUR;
/* N >= 3 (odd) `redis` URLs, one lock layer each (backend_redlock.c). */
enum lk_code backend_redlock_new(const struct lk_config *cfg, struct backend *out, char *err,
                                 size_t errlen) LK_WUR;

/* The sentinels in `redis`, the primary named redis_master_name, followed
 * through failover (redis_sentinel.c); the redis lock layer on it. */
enum lk_code backend_sentinel_new(const struct lk_config *cfg, struct backend *out, char *err,
                                  size_t errlen) LK_WUR;

/* A Redis Cluster (redis_cluster.c): the seed nodes in `redis`, one redis
 * lock layer per primary, each name routed to the primary of its slot. */
enum lk_code backend_cluster_new(const struct lk_config *cfg, struct backend *out, char *err,
                                 size_t errlen) LK_WUR;

/* What backend_open checks of the configuration short of reaching any
 * node (the URLs in `redis`, their number, the names they need), with the
 * same one-line messages: lockd --check-config runs it, and startup before
 * backend_open. LK_OK or LK_INVALID. */
enum lk_code backend_check(const struct lk_config *cfg, char *err, size_t errlen) LK_WUR;
enum lk_code backend_redis_check(const struct lk_config *cfg, char *err, size_t errlen) LK_WUR;
enum lk_code backend_redlock_check(const struct lk_config *cfg, char *err, size_t errlen) LK_WUR;
enum lk_code backend_sentinel_check(const struct lk_config *cfg, char *err, size_t errlen) LK_WUR;
enum lk_code backend_cluster_check(const struct lk_config *cfg, char *err, size_t errlen) LK_WUR;

/* A result with every field empty and code set (backends start from it). */
void bk_res_init(struct bk_res *r, enum lk_code code);

#endif
