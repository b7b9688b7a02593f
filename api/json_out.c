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

/* Writes "\uXXXX" at o, as jansson writes it; returns the end. */
static char *put_u16(char *o, unsigned v)
{
    static const char hex[] = "0123456789ABCDEF"; /* as jansson writes them */
    *o++ = '\\';
    *o++ = 'u';
    *o++ = hex[(v >> 12) & 15];
    *o++ = hex[(v >> 8) & 15];
    *o++ = hex[(v >> 4) & 15];
    *o++ = hex[v & 15];
    return o;
}

/* Bytes written as they are: printable ASCII but '"' and '\\'. */
#define P16 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
static const bool plain[256] = {
    [0x20] = 1, [0x21] = 1,   [0x23] = 1,   [0x24] = 1, [0x25] = 1,   [0x26] = 1,   [0x27] = 1,
    [0x28] = 1, [0x29] = 1,   [0x2a] = 1,   [0x2b] = 1, [0x2c] = 1,   [0x2d] = 1,   [0x2e] = 1,
    [0x2f] = 1, [0x30] = P16, [0x40] = P16, [0x50] = 1, [0x51] = 1,   [0x52] = 1,   [0x53] = 1,
    [0x54] = 1, [0x55] = 1,   [0x56] = 1,   [0x57] = 1, [0x58] = 1,   [0x59] = 1,   [0x5a] = 1,
    [0x5b] = 1, [0x5d] = 1,   [0x5e] = 1,   [0x5f] = 1, [0x60] = P16, [0x70] = P16,
};
#undef P16

static void put_string(struct jout *j, const char *s)
{
    /* At most 6 bytes out per byte in ("\u00XX" for a control byte; a
     * 4-byte UTF-8 sequence becomes 12), so one grow covers the string. */
    grow(j, 6 * strlen(s) + 2);
    char *o = j->p + j->len;
    *o++ = '"';
    const unsigned char *p = (const unsigned char *)s;
    for (;;) {
        /* A run of plain bytes (names, leases and times are one run) is
         * measured first and copied at once. */
        size_t run = 0;
        while (plain[p[run]])
            run++;
        memcpy(o, p, run);
        o += run;
        p += run;
        unsigned c = *p;
        if (c == '\0') {
            break;
        } else if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
            p++;
        } else if (c < 0x20) {
            char esc = c == '\b'   ? 'b'
                       : c == '\f' ? 'f'
                       : c == '\n' ? 'n'
                       : c == '\r' ? 'r'
                       : c == '\t' ? 't'
                                   : 0;
            if (esc != 0) {
                *o++ = '\\';
                *o++ = esc;
            } else {
                o = put_u16(o, c);
            }
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
                o = put_u16(o, 0xd800 | (cp >> 10));
                o = put_u16(o, 0xdc00 | (cp & 0x3ff));
            } else {
                o = put_u16(o, cp);
            }
        }
    }
    *o++ = '"';
    j->len = (size_t)(o - j->p);
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
