/*
 * log.c - stderr logger. Each line is built in a local buffer and written with
 * one write(2), so lines from different threads never interleave.
 */
#include "server/log.h"

#include <stdarg.h>
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

/* Appends s JSON-escaped; stops at the buffer end. */
static size_t put_escaped(char *buf, size_t off, size_t cap, const char *s)
{
    for (; *s && off + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[off++] = '\\';
            buf[off++] = (char)c;
        } else if (c < 0x20) {
            off += (size_t)snprintf(buf + off, cap - off, "\\u%04x", c);
        } else {
            buf[off++] = (char)c;
        }
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

static void emit(enum lk_level level, const char *msg, va_list *kv)
{
    char buf[4096];
    size_t cap = sizeof(buf) - 2, off = 0;
    char ts[32];
    lk_rfc3339(lk_wall_ms(), ts);
    if (lk_log_json) {
        off = put_raw(buf, off, cap, "{\"ts\":\"");
        off = put_raw(buf, off, cap, ts);
        off = put_raw(buf, off, cap, "\",\"level\":\"");
        off = put_raw(buf, off, cap, level_names[level]);
        off = put_raw(buf, off, cap, "\",\"msg\":\"");
        off = put_escaped(buf, off, cap, msg);
        off = put_raw(buf, off, cap, "\"");
        if (kv != NULL) {
            const char *k;
            while ((k = va_arg(*kv, const char *)) != NULL) {
                const char *v = va_arg(*kv, const char *);
                off = put_raw(buf, off, cap, ",\"");
                off = put_escaped(buf, off, cap, k);
                off = put_raw(buf, off, cap, "\":\"");
                off = put_escaped(buf, off, cap, v ? v : "");
                off = put_raw(buf, off, cap, "\"");
            }
        }
        off = put_raw(buf, off, cap, "}");
    } else {
        off = put_raw(buf, off, cap, ts);
        off = put_raw(buf, off, cap, " ");
        off = put_raw(buf, off, cap, level_names[level]);
        off = put_raw(buf, off, cap, " ");
        off = put_raw(buf, off, cap, msg);
        if (kv != NULL) {
            const char *k;
            while ((k = va_arg(*kv, const char *)) != NULL) {
                const char *v = va_arg(*kv, const char *);
                off = put_raw(buf, off, cap, " ");
                off = put_raw(buf, off, cap, k);
                off = put_raw(buf, off, cap, "=");
                off = put_raw(buf, off, cap, v ? v : "");
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
