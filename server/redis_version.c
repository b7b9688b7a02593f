/*
 * redis_version.c - is this Redis new enough for lockd's scripts? Read from
 * INFO server at startup (backend_redis.c's probe), so that an old Redis is
 * a clear configuration error rather than every acquire answering 503.
 */
#include "server/redis_version.h"

#include <stdlib.h>
#include <string.h>

bool redis_info_field(const char *info, const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    size_t kl = strlen(key);
    const char *p = info;
    /* the field starts a line and is followed by ':' */
    while ((p = strstr(p, key)) != NULL && ((p != info && p[-1] != '\n') || p[kl] != ':'))
        p += kl;
    if (p == NULL || cap == 0)
        return false;
    p += kl + 1;
    size_t n = strcspn(p, "\r\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

bool redis_version_ok(const char *info, char *version, size_t cap)
{
    if (!redis_info_field(info, "redis_version", version, cap))
        return true;
    char *end;
    long major = strtol(version, &end, 10);
    if (end == version)
        return true; /* not a number: not ours to judge */
    long minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    return major > REDIS_MIN_MAJOR || (major == REDIS_MIN_MAJOR && minor >= REDIS_MIN_MINOR);
}
