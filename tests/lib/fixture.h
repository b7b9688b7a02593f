/*
 * fixture.h - starts the lockd under test on the backend TH_BACKEND names
 * (memory by default, or redis: a fresh redis-server of its own).
 */
#ifndef LOCKD_TESTS_LIB_FIXTURE_H
#define LOCKD_TESTS_LIB_FIXTURE_H

#include "tests/lib/harness.h"

struct fixture {
    struct th_lockd lockd;
    struct th_redis redis;
    bool redis_on;
    char redis_url[64];
};

/* Starts lockd with extra args (NULL-terminated) on the chosen backend. */
void fx_start(struct fixture *f, const char *const *extra);
/* Starts only the chosen backend (a redis-server of its own when
 * TH_BACKEND=redis), no lockd: for suites whose every lockd has its own
 * flags and is started with fx_lockd_start. fx_stop stops it. */
void fx_backend_start(struct fixture *f);
/* Starts one more lockd l on the fixture's backend (the same Redis), with
 * extra args and env (NULL-terminated, either may be NULL); the caller stops
 * it with th_lockd_kill. The try form returns false instead of failing. */
void fx_lockd_start(const struct fixture *f, struct th_lockd *l, const char *const *extra,
                    const char *const *env);
bool fx_lockd_try_start(const struct fixture *f, struct th_lockd *l, const char *const *extra,
                        const char *const *env, int *exit_code);
/* Restarts lockd (same backend, same Redis). */
void fx_restart(struct fixture *f, const char *const *extra);
void fx_stop(struct fixture *f);
bool fx_is_redis(void);
/* Fails unless lockd l says (GET /readyz) it runs on the fixture's backend:
 * memory, or redis with the fixture's redis-server as its node. */
void fx_check_backend(const struct fixture *f, const struct th_lockd *l);

/* "URL/path" into a static per-thread buffer. */
const char *fx_url(const struct fixture *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
