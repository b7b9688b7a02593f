/*
 * conformance.h - the backend conformance suite: one set of cases
 * (cases.c) run against every backend of a table (backends.c) through
 * struct backend alone, on one lk_loop driven by the test's thread
 * (conformance.c). `conformance NAME` runs every case on one backend;
 * tests/run.sh runs it once per name `conformance --list` prints.
 */
#ifndef LOCKD_TESTS_CONFORMANCE_CONFORMANCE_H
#define LOCKD_TESTS_CONFORMANCE_CONFORMANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "server/backend.h"

/* backend_timeout_ms every backend is opened with: how long a case waits
 * for a backend that stopped answering. */
#define CF_TIMEOUT_MS 500

/* One row per backend. start/stop bracket the whole run (the processes the
 * backend talks to); open sets the config keys that select it, and the
 * suite opens it with backend_open(). A fault hook left NULL skips the
 * cases that need it ("SKIP case (no fault hook)"). */
struct cf_backend {
    const char *name;
    void (*start)(void);
    void (*stop)(void);
    void (*open)(struct lk_config *cfg);
    void (*pause)(void);   /* stops answering, connections left open (SIGSTOP) */
    void (*resume)(void);  /* answers again (SIGCONT) */
    void (*restart)(void); /* dies (kill -9) and comes back, same address and persistence */
};

extern const struct cf_backend cf_backends[]; /* ends with a row whose name is NULL */

/* The backend under test, opened fresh for each case. */
struct cf {
    const struct cf_backend *def;
    struct lk_config cfg;
    struct backend be;
    struct lk_loop *lp;
};

#define CF_MAX_HOLDERS 8
#define CF_MAX_ENTRIES 256

struct cf_entry {
    char name[LK_NAME_MAX + 1];
    struct bk_holder holder;
    size_t nholders;
    int64_t limit;
    int64_t index; /* BK_CAP_INDEX */
};

/* A bk_res copied out of its callback (whose pointers die with it). */
struct cf_res {
    enum lk_code code;
    int64_t fencing_token, ttl_ms, validity_ms, delay_ms;
    bool room;            /* OK acquire of a semaphore's slot */
    int64_t limit;        /* LIMIT_MISMATCH, INSPECT, LOCKED */
    size_t total_holders; /* INSPECT */
    int64_t index;        /* INSPECT (BK_CAP_INDEX) */
    struct bk_holder holders[CF_MAX_HOLDERS];
    size_t nholders;
    struct cf_entry entries[CF_MAX_ENTRIES];
    size_t nentries;
    bool has_next;
    char next_cursor[1024];
    char refusal[512];           /* bk_res.refusal, "" when NULL */
    struct bk_renew_item *items; /* RENEW_MANY: must be the request's own */
    size_t nitems;
    int64_t tokens[64]; /* ACQUIRE_MULTI: OK, one per name asked */
    size_t ntokens;
    size_t blocked; /* ACQUIRE_MULTI refused: the name it names */
    /* the completion contract, as observed */
    int calls;
    bool done;
    int64_t took_ms; /* from submit to done */
};

/* ---- the driver (conformance.c) ---- */

/* Submits req and runs the loop until done ran (at most 10 s). Fails the case
 * unless the completion contract holds: LK_OK means done already ran,
 * LK_AGAIN that it had not; done runs once. res is heap-sized: callers keep
 * one static. */
void cf_submit(struct cf *c, const struct bk_req *req, struct cf_res *res);
/* Submits without waiting (for requests in flight together); cf_settle
 * runs the loop until every one of res[0..n) is done, at most timeout_ms. */
void cf_submit_async(struct cf *c, const struct bk_req *req, struct cf_res *res, int64_t *t0);
bool cf_settle(struct cf *c, struct cf_res *const *res, size_t n, int64_t timeout_ms);
/* Runs the loop for ms (late replies, timers). */
void cf_run_for(struct cf *c, int64_t ms);

/* Synchronous shorthands (a static result each call overwrites: copy what
 * you keep). */
const struct cf_res *cf_acquire(struct cf *c, const char *name, const char *lease,
                                const char *owner, int64_t ttl_ms);
const struct cf_res *cf_renew(struct cf *c, const char *name, const char *lease, int64_t ttl_ms);
const struct cf_res *cf_release(struct cf *c, const char *name, const char *lease,
                                int64_t delay_ms);
const struct cf_res *cf_inspect(struct cf *c, const char *name);
/* Acquire in a mode with a limit; wait marks it a waiter's (bk_req.wait). */
const struct cf_res *cf_acquire_as(struct cf *c, const char *name, const char *lease,
                                   const char *owner, int64_t ttl_ms, enum bk_mode mode,
                                   int64_t limit, bool wait);
/* Acquire with ttl 60 s that must be granted; returns its token. */
int64_t cf_grant(struct cf *c, const char *name, const char *lease, const char *owner);
/* Polls (acquire of name by lease, each try a fresh request) until granted
 * or timeout_ms; returns the granted token or fails the case. Every answer
 * before must be want_before (e.g. LK_LOCKED or LK_BACKEND_DOWN). */
int64_t cf_acquire_within(struct cf *c, const char *name, const char *lease, int64_t timeout_ms,
                          enum lk_code want_before, int *tries);

/* ---- the cases (cases.c) ---- */

#define CF_NEEDS_PAUSE 0x1u   /* pause and resume hooks */
#define CF_NEEDS_RESTART 0x2u /* restart hook */

struct cf_case {
    const char *name;
    void (*run)(struct cf *c);
    unsigned needs; /* CF_NEEDS_*: skipped without the hooks */
    unsigned caps;  /* BK_CAP_*: skipped unless the backend declares them */
};

extern const struct cf_case cf_cases[]; /* ends with a row whose name is NULL */

#endif
