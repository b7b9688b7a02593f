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

/* The fixture's backend flags, then extra: into args (cap entries, NULL-terminated). */
static void backend_args(const struct fixture *f, const char *const *extra, const char **args,
                         int cap)
{
    int n = 0;
    if (f->redis_on) {
        args[n++] = "--redis";
        args[n++] = f->redis_url;
    }
    for (const char *const *a = extra; a && *a; a++) {
        if (n >= cap - 1)
            th_fail(__FILE__, __LINE__, "fixture: too many lockd args");
        args[n++] = *a;
    }
    args[n] = NULL;
}

bool fx_lockd_try_start(const struct fixture *f, struct th_lockd *l, const char *const *extra,
                        const char *const *env, int *exit_code)
{
    const char *args[48];
    backend_args(f, extra, args, 48);
    return th_lockd_try_start(l, args, env, exit_code);
}

void fx_lockd_start(const struct fixture *f, struct th_lockd *l, const char *const *extra,
                    const char *const *env)
{
    const char *args[48];
    backend_args(f, extra, args, 48);
    th_lockd_start(l, args, env);
}

void fx_backend_start(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    if (fx_is_redis()) {
        th_redis_start(&f->redis, 0, NULL);
        f->redis_on = true;
        snprintf(f->redis_url, sizeof(f->redis_url), "redis://127.0.0.1:%d", f->redis.port);
    }
}

void fx_start(struct fixture *f, const char *const *extra)
{
    fx_backend_start(f);
    fx_lockd_start(f, &f->lockd, extra, NULL);
}

void fx_restart(struct fixture *f, const char *const *extra)
{
    th_lockd_kill(&f->lockd, SIGKILL);
    fx_lockd_start(f, &f->lockd, extra, NULL);
}

void fx_stop(struct fixture *f)
{
    th_lockd_kill(&f->lockd, SIGTERM);
    if (f->redis_on)
        th_redis_stop(&f->redis);
}

void fx_check_backend(const struct fixture *f, const struct th_lockd *l)
{
    char url[128], node[64];
    snprintf(url, sizeof(url), "%s/readyz", l->url);
    snprintf(node, sizeof(node), "127.0.0.1:%d", f->redis.port);
    struct th_client *c = th_client_new();
    struct th_resp r;
    th_http(c, "GET", url, NULL, NULL, &r);
    const char *backend = th_jstr(&r, "backend");
    json_t *n0 = json_array_get(json_object_get(r.json, "nodes"), 0);
    const char *got = json_string_value(json_object_get(n0, "node"));
    if (r.status != 200 || backend == NULL || got == NULL ||
        strcmp(backend, f->redis_on ? "redis" : "memory") != 0 ||
        strcmp(got, f->redis_on ? node : "memory") != 0)
        th_fail(__FILE__, __LINE__, "lockd at %s is not on the fixture's backend (%s%s): %ld %s",
                l->url, f->redis_on ? "redis " : "memory", f->redis_on ? node : "", r.status,
                r.body);
    th_resp_free(&r);
    th_client_free(c);
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
