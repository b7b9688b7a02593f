/*
 * log.c - stderr logger. Each line is built in a local buffer and written with
 * one write(2), so lines from different threads never interleave. Fields
 * named "lease" are cut to their first 6 characters.
 */
#include "server/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/util.h"

int lk_log_level = LK_INFO;
int lk_log_json = 1;

static const char *level_names[] = {"debug", "info", "warn", "error", "fatal"};

int lk_log_parse_level(const char *s)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one
 * (stray continuation, overlong form, surrogate, past U+10FFFF, cut short). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Appends s JSON-escaped; stops before cap. Bytes that are not UTF-8 become
 * U+FFFD, so that every line stays valid JSON whatever a client sent. */
static size_t put_escaped(char *buf, size_t off, size_t cap, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p && off + 7 < cap) {
        unsigned char c = *p;
        size_t n = utf8_len(p);
        if (c == '"' || c == '\\') {
            buf[off++] = '\\';
            buf[off++] = (char)c;
        } else if (c < 0x20) {
            off += (size_t)snprintf(buf + off, cap - off, "\\u%04x", c);
        } else if (n == 0) {
            off += (size_t)snprintf(buf + off, cap - off, "\\ufffd");
            n = 1;
        } else {
            memcpy(buf + off, p, n);
            off += n;
        }
        p += n ? n : 1;
    }
    return off;
}

static size_t put_raw(char *buf, size_t off, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (off + 1 >= cap)
        return off;
    if (n > cap - off - 1)
        n = cap - off - 1;
    memcpy(buf + off, s, n);
    return off + n;
}

/* A lease is a bearer secret, and so is a session id (it can heartbeat and
 * end the session): a "lease" or "session" field shows its first 6
 * characters only, enough to match log lines, never enough to use it
 * (DESIGN.md §2). */
#define LEASE_SHOWN 6

static const char *shown(const char *key, const char *v, char *buf)
{
    if (v == NULL)
        return "";
    if (strcmp(key, "lease") != 0 && strcmp(key, "session") != 0)
        return v;
    snprintf(buf, LEASE_SHOWN + 1, "%s", v);
    return buf;
}

/* Fields written as JSON numbers when their value is one. */
static bool numeric(const char *key, const char *v)
{
    static const char *const keys[] = {"status", "ms",       "fencing_token",
                                       "port",   "released", "locks"};
    bool known = false;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        known = known || strcmp(key, keys[i]) == 0;
    if (!known || *v == '\0')
        return false;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    (void)d;
    return *end == '\0' && errno == 0 && strspn(v, "-0123456789.") == strlen(v);
}

static void emit(enum lk_level level, const char *msg, va_list *kv)
{
    char buf[4096];
    /* Text stops at soft; the closing quotes and braces always fit below hard,
     * so a long value is cut but the line stays one valid JSON object. */
    const size_t hard = sizeof(buf) - 2, soft = sizeof(buf) - 64;
    size_t off = 0;
    char ts[32];
    lk_rfc3339(lk_wall_ms(), ts);
    if (lk_log_json) {
        off = put_raw(buf, off, hard, "{\"ts\":\"");
        off = put_raw(buf, off, hard, ts);
        off = put_raw(buf, off, hard, "\",\"level\":\"");
        off = put_raw(buf, off, hard, level_names[level]);
        off = put_raw(buf, off, hard, "\",\"msg\":\"");
        off = put_escaped(buf, off, soft, msg);
        off = put_raw(buf, off, hard, "\"");
        if (kv != NULL) {
            const char *k;
            while ((k = va_arg(*kv, const char *)) != NULL) {
                char shortv[LEASE_SHOWN + 1];
                const char *v = shown(k, va_arg(*kv, const char *), shortv);
                if (off + strlen(k) + 16 >= soft)
                    continue; /* no room left: drop the field whole */
                bool num = numeric(k, v);
                off = put_raw(buf, off, hard, ",\"");
                off = put_escaped(buf, off, soft, k);
                off = put_raw(buf, off, hard, num ? "\":" : "\":\"");
                off = put_escaped(buf, off, soft, v);
                if (!num)
                    off = put_raw(buf, off, hard, "\"");
            }
        }
        off = put_raw(buf, off, hard, "}");
    } else {
        off = put_raw(buf, off, hard, ts);
        off = put_raw(buf, off, hard, " ");
        off = put_raw(buf, off, hard, level_names[level]);
        off = put_raw(buf, off, hard, " ");
        off = put_raw(buf, off, hard, msg);
        if (kv != NULL) {
            const char *k;
            while ((k = va_arg(*kv, const char *)) != NULL) {
                char shortv[LEASE_SHOWN + 1];
                const char *v = shown(k, va_arg(*kv, const char *), shortv);
                off = put_raw(buf, off, hard, " ");
                off = put_raw(buf, off, hard, k);
                off = put_raw(buf, off, hard, "=");
                off = put_raw(buf, off, hard, v);
            }
        }
    }
    buf[off++] = '\n';
    ssize_t r = write(STDERR_FILENO, buf, off);
    (void)r;
}

void lk_log_write(enum lk_level level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    emit(level, msg, NULL);
}

void lk_log_kv(enum lk_level level, const char *msg, ...)
{
    if ((int)level < lk_log_level)
        return;
    va_list ap;
    va_start(ap, msg);
    emit(level, msg, &ap);
    va_end(ap);
}
