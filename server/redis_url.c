/*
 * redis_url.c - redis://[user:password@]host:port[/db] parsing. Errors name
 * the part that is wrong but never echo the password (the URL is a secret).
 */
#include "server/redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

/* Percent-decodes [s, s+len) into out (cap bytes with NUL); false if bad.
 * A raw control byte is bad (it must come %-encoded): a URL holding a line
 * break would print as two lines in --check-config. */
static bool decode(const char *s, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if ((unsigned char)c < 0x20 || c == 0x7f)
            return false;
        if (c == '%') {
            int hi = i + 1 < len ? lk_hexval(s[i + 1]) : -1;
            int lo = i + 2 < len ? lk_hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) /* %00 would cut the string */
                return false;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}

static bool parse_int(const char *s, size_t len, long min, long max, int *out)
{
    if (len == 0 || len > 9)
        return false;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < min || v > max)
        return false;
    *out = (int)v;
    return true;
}

enum lk_code redis_url_parse(const char *s, struct redis_url *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof(*u));
    u->port = 6379;
    static const char scheme[] = "redis://";
    if (strncmp(s, "rediss://", 9) == 0) {
        snprintf(err, errlen, "invalid redis URL: rediss:// (TLS) is not supported");
        return LK_INVALID;
    }
    if (strncmp(s, scheme, sizeof(scheme) - 1) != 0) {
        snprintf(err, errlen, "invalid redis URL: must start with redis://");
        return LK_INVALID;
    }
    const char *p = s + sizeof(scheme) - 1;
    const char *end = p + strlen(p);
    /* The authority ends at the first '/'; credentials end at its last '@'. */
    const char *slash = strchr(p, '/');
    const char *auth_end = slash ? slash : end;
    const char *at = NULL;
    for (const char *q = p; q < auth_end; q++)
        if (*q == '@')
            at = q;
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = p;
        if (colon != NULL) {
            if (!decode(p, (size_t)(colon - p), u->user, sizeof(u->user))) {
                snprintf(err, errlen, "invalid redis URL: bad user name");
                return LK_INVALID;
            }
            pw = colon + 1;
        }
        if (!decode(pw, (size_t)(at - pw), u->password, sizeof(u->password))) {
            snprintf(err, errlen, "invalid redis URL: bad password encoding or length");
            return LK_INVALID;
        }
        if (u->user[0] != '\0' && u->password[0] == '\0') {
            /* decoded, the name may hold %0a: the error stays one line */
            char shown[sizeof(u->user)];
            size_t i = 0;
            for (; u->user[i] != '\0'; i++)
                shown[i] = u->user[i] >= 0x20 && u->user[i] < 0x7f ? u->user[i] : '?';
            shown[i] = '\0';
            snprintf(err, errlen, "invalid redis URL: user '%s' needs a password", shown);
            return LK_INVALID;
        }
        p = at + 1;
    }
    const char *host = p, *host_end;
    if (*p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', (size_t)(auth_end - host));
        if (host_end == NULL) {
            snprintf(err, errlen, "invalid redis URL: unterminated '[' in host");
            return LK_INVALID;
        }
        p = host_end + 1;
    } else {
        host_end = memchr(p, ':', (size_t)(auth_end - p));
        if (host_end == NULL)
            host_end = auth_end;
        p = host_end;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0 || hlen >= sizeof(u->host)) {
        snprintf(err, errlen, "invalid redis URL: missing or too long host");
        return LK_INVALID;
    }
    for (size_t i = 0; i < hlen; i++) {
        char c = host[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == ':' || c == '_')) {
            snprintf(err, errlen, "invalid redis URL: bad character in host");
            return LK_INVALID;
        }
    }
    memcpy(u->host, host, hlen);
    u->host[hlen] = '\0';
    if (p < auth_end) {
        if (*p != ':' || !parse_int(p + 1, (size_t)(auth_end - p - 1), 1, 65535, &u->port)) {
            snprintf(err, errlen, "invalid redis URL: port must be 1..65535");
            return LK_INVALID;
        }
    }
    if (slash != NULL && slash + 1 < end) {
        if (!parse_int(slash + 1, (size_t)(end - slash - 1), 0, 100000, &u->db)) {
            snprintf(err, errlen, "invalid redis URL: database must be a number after '/'");
            return LK_INVALID;
        }
    }
    return LK_OK;
}

enum lk_code redis_url_parse_list(const char *urls, struct redis_url *out, size_t max, size_t *n,
                                  const char *what, char *err, size_t errlen)
{
    *n = 0;
    for (const char *p = urls; *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char one[1024];
        if (*n == max) {
            snprintf(err, errlen, "invalid value for 'redis': %s takes at most %zu URLs", what,
                     max);
            return LK_INVALID;
        }
        if (len >= sizeof(one)) {
            snprintf(err, errlen, "invalid value for 'redis': a URL is too long");
            return LK_INVALID;
        }
        memcpy(one, p, len);
        one[len] = '\0';
        enum lk_code rc = redis_url_parse(one, &out[*n], err, errlen);
        memset(one, 0, sizeof(one)); /* the password */
        if (rc != LK_OK)
            return rc;
        (*n)++;
        p += len;
        if (*p == ',')
            p++;
    }
    return LK_OK;
}
