/*
 * backend_redis.c - placeholder until the Redis backend lands (issue 3).
 */
#include <stdio.h>

#include "server/backend.h"

enum lk_code backend_redis_new(const struct lk_config *cfg, struct backend *out, char *err,
                               size_t errlen)
{
    (void)cfg;
    (void)out;
    snprintf(err, errlen, "the redis backend is not built yet");
    return LK_UNSUPPORTED;
}
