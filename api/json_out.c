/*
 * json_out.c - see json_out.h. Strings are escaped as jansson escapes them
 * (\" \\ \b \f \n \r \t, other controls and non-ASCII as \uXXXX, UTF-16
 * surrogate pairs above U+FFFF); inputs are valid UTF-8 (decoded by jansson
 * or checked names).
 */
#include "api/json_out.h"

#include <stdio.h>
#include <string.h>

#include "server/util.h"

static void grow(struct jout *j, size_t need)
{
    if (j->len + need <= j->cap)
        return;
    while (j->len + need > j->cap)
        j->cap *= 2;
    j->p = lk_realloc(j->p, j->cap);
}

static void put(struct jout *j, const char *s, size_t n)
{
    grow(j, n);
    memcpy(j->p + j->len, s, n);
    j->len += n;
}

static void put_u16(struct jout *j, unsigned v)
{
    static const char hex[] = "0123456789ABCDEF"; /* as jansson writes them */
    char b[6] = {'\\',       'u', hex[(v >> 12) & 15], hex[(v >> 8) & 15], hex[(v >> 4) & 15],
                 hex[v & 15]};
    put(j, b, 6);
}

static void put_string(struct jout *j, const char *s)
{
    put(j, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const unsigned char *run = p;
        while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            put(j, (const char *)run, (size_t)(p - run));
        if (*p == '\0')
            break;
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(j, e, 2);
            p++;
        } else if (c < 0x20) {
            const char *esc = c == '\b'   ? "\\b"
                              : c == '\f' ? "\\f"
                              : c == '\n' ? "\\n"
                              : c == '\r' ? "\\r"
                              : c == '\t' ? "\\t"
                                          : NULL;
            if (esc != NULL)
                put(j, esc, 2);
            else
                put_u16(j, c);
            p++;
        } else {
            /* UTF-8 sequence to a code point. */
            unsigned cp;
            int n;
            if ((c & 0xe0) == 0xc0) {
                cp = c & 0x1f;
                n = 1;
            } else if ((c & 0xf0) == 0xe0) {
                cp = c & 0x0f;
                n = 2;
            } else {
                cp = c & 0x07;
                n = 3;
            }
            p++;
            for (int i = 0; i < n && (*p & 0xc0) == 0x80; i++, p++)
                cp = (cp << 6) | (*p & 0x3f);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                put_u16(j, 0xd800 | (cp >> 10));
                put_u16(j, 0xdc00 | (cp & 0x3ff));
            } else {
                put_u16(j, cp);
            }
        }
    }
    put(j, "\"", 1);
}

/* Keys are identifiers of ours: copied, never escaped. */
static void key(struct jout *j, const char *k)
{
    size_t n = strlen(k);
    grow(j, n + 4);
    char *o = j->p + j->len;
    if (!j->first)
        *o++ = ',';
    j->first = false;
    *o++ = '"';
    memcpy(o, k, n);
    o += n;
    *o++ = '"';
    *o++ = ':';
    j->len = (size_t)(o - j->p);
}

void jout_begin(struct jout *j)
{
    j->cap = 512;
    j->p = lk_malloc(j->cap);
    j->len = 0;
    j->first = true;
    put(j, "{", 1);
}

void jout_str(struct jout *j, const char *k, const char *val)
{
    key(j, k);
    if (val == NULL)
        put(j, "null", 4);
    else
        put_string(j, val);
}

void jout_int(struct jout *j, const char *k, int64_t val)
{
    key(j, k);
    char b[24];
    put(j, b, lk_itoa(val, b));
}

void jout_bool(struct jout *j, const char *k, bool val)
{
    key(j, k);
    if (val)
        put(j, "true", 4);
    else
        put(j, "false", 5);
}

char *jout_end(struct jout *j, size_t *len)
{
    put(j, "}\n", 2);
    grow(j, 1);
    j->p[j->len] = '\0';
    *len = j->len;
    return j->p;
}
