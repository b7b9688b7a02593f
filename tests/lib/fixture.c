/*
 * fixture.c - see fixture.h.
 */
#include "tests/lib/fixture.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool fx_is_redis(void)
{
    const char *b = getenv("TH_BACKEND");
    return b != NULL && strcmp(b, "redis") == 0;
}

static void launch(struct fixture *f, const char *const *extra)
{
    const char *args[48];
    int n = 0;
    if (f->redis_on) {
        args[n++] = "--redis";
        args[n++] = f->redis_url;
    }
    for (const char *const *a = extra; a && *a && n < 46; a++)
        args[n++] = *a;
    args[n] = NULL;
    th_lockd_start(&f->lockd, args, NULL);
}

void fx_start(struct fixture *f, const char *const *extra)
{
    memset(f, 0, sizeof(*f));
    if (fx_is_redis()) {
        th_redis_start(&f->redis, 0, NULL);
        f->redis_on = true;
        snprintf(f->redis_url, sizeof(f->redis_url), "redis://127.0.0.1:%d", f->redis.port);
    }
    launch(f, extra);
}

void fx_restart(struct fixture *f, const char *const *extra)
{
    th_lockd_kill(&f->lockd, SIGKILL);
    launch(f, extra);
}

void fx_stop(struct fixture *f)
{
    th_lockd_kill(&f->lockd, SIGTERM);
    if (f->redis_on)
        th_redis_stop(&f->redis);
}

const char *fx_url(const struct fixture *f, const char *fmt, ...)
{
    static __thread char buf[4][2048];
    static __thread int slot;
    char *b = buf[slot++ % 4];
    int n = snprintf(b, 2048, "%s", f->lockd.url);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b + n, (size_t)(2048 - n), fmt, ap);
    va_end(ap);
    return b;
}
