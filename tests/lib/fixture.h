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
/* Restarts lockd (same backend, same Redis). */
void fx_restart(struct fixture *f, const char *const *extra);
void fx_stop(struct fixture *f);
bool fx_is_redis(void);

/* "URL/path" into a static per-thread buffer. */
const char *fx_url(const struct fixture *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
