/*
 * backend.c - picks the backend the configuration names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/backend.h"

enum lk_code backend_open(const struct lk_config *cfg, struct backend *out, char *err,
                          size_t errlen)
{
    if (strcmp(cfg->backend, "memory") == 0)
        return backend_memory_new(cfg, out);
    if (strcmp(cfg->backend, "redis") == 0)
        return backend_redis_new(cfg, out, err, errlen);
    if (strcmp(cfg->backend, "sentinel") == 0)
        return backend_sentinel_new(cfg, out, err, errlen);
    if (strcmp(cfg->backend, "cluster") == 0)
        return backend_cluster_new(cfg, out, err, errlen);
    if (strcmp(cfg->backend, "redlock") == 0)
        return backend_redlock_new(cfg, out, err, errlen);
    snprintf(err, errlen, "invalid value '%s' for 'backend': not built yet", cfg->backend);
    return LK_UNSUPPORTED;
}

enum lk_code backend_check(const struct lk_config *cfg, char *err, size_t errlen)
{
    if (strcmp(cfg->backend, "memory") == 0)
        return LK_OK;
    if (strcmp(cfg->backend, "redis") == 0)
        return backend_redis_check(cfg, err, errlen);
    if (strcmp(cfg->backend, "sentinel") == 0)
        return backend_sentinel_check(cfg, err, errlen);
    if (strcmp(cfg->backend, "cluster") == 0)
        return backend_cluster_check(cfg, err, errlen);
    if (strcmp(cfg->backend, "redlock") == 0)
        return backend_redlock_check(cfg, err, errlen);
    snprintf(err, errlen, "invalid value '%s' for 'backend': not built yet", cfg->backend);
    return LK_INVALID;
}

bool backend_cursor_split(const char *cursor, size_t n, size_t *k, const char **inner)
{
    /* digits only, no leading zero: the one spelling "%zu." writes */
    size_t d = strspn(cursor, "0123456789");
    if (d == 0 || d > 9 || cursor[d] != '.' || (d > 1 && cursor[0] == '0'))
        return false;
    size_t v = (size_t)strtoul(cursor, NULL, 10);
    if (v >= n)
        return false;
    *k = v;
    *inner = cursor + d + 1;
    return true;
}

void bk_res_init(struct bk_res *r, enum lk_code code)
{
    memset(r, 0, sizeof(*r));
    r->code = code;
    r->validity_ms = -1;
}
