/*
 * fuzz_parse.c - libFuzzer target for what comes in the URL and headers: the
 * percent-decoding of the path (parse_unescape), lock names, leases, the list
 * query (prefix, cursor, limit), the lease pick across header/query/body and
 * duration strings. The input is split at '\n' into up to four fields.
 * Built by `make fuzz`; seeds in corpus/fuzz_parse.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/errors.h"
#include "api/json_in.h"
#include "api/parse.h"
#include "config/config.h"
#include "server/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_parse: broken promise: %s\n", what);
        abort();
    }
}

/* A reference decoder written differently: %XX with two hex digits, not 00. */
static int ref_hex(char c)
{
    static const char digits[] = "0123456789abcdef0123456789ABCDEF";
    const char *p = c != '\0' ? strchr(digits, c) : NULL;
    return p != NULL ? (int)(p - digits) % 16 : -1;
}

static size_t ref_unescape(const char *in, char *out)
{
    size_t w = 0;
    for (size_t i = 0; in[i] != '\0'; i++) {
        if (in[i] == '%' && in[i + 1] != '\0') {
            int hi = ref_hex(in[i + 1]), lo = ref_hex(in[i + 2]);
            if (hi >= 0 && lo >= 0 && hi * 16 + lo != 0) {
                out[w++] = (char)(hi * 16 + lo);
                i += 2;
                continue;
            }
        }
        out[w++] = in[i];
    }
    out[w] = '\0';
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Fields are NUL-terminated copies, as libmicrohttpd hands them over. */
    char *f[4] = {NULL, NULL, NULL, NULL};
    size_t start = 0;
    for (int i = 0; i < 4; i++) {
        size_t end = start;
        while (end < size && (i == 3 || data[end] != '\n'))
            end++;
        size_t n = end > start ? end - start : 0;
        f[i] = malloc(n + 1);
        if (n)
            memcpy(f[i], data + start, n);
        f[i][n] = '\0';
        start = end < size ? end + 1 : size;
    }

    /* Path decoding: never longer, never an embedded NUL, same as the reference. */
    size_t inlen = strlen(f[0]);
    char *dec = strdup(f[0]);
    char *ref = malloc(inlen + 1);
    size_t dlen = parse_unescape(dec);
    size_t rlen = ref_unescape(f[0], ref);
    must(dlen <= inlen && strlen(dec) == dlen, "unescape length");
    must(dlen == rlen && memcmp(dec, ref, dlen) == 0, "unescape matches the reference");
    bool valid = lk_name_valid(dec, dlen);
    struct api_error e;
    must(json_in_name(dec, &e) == valid, "json_in_name agrees with lk_name_valid");
    if (valid) {
        must(dlen >= 1 && dlen <= LK_NAME_MAX, "name length");
        for (size_t i = 0; i < dlen; i++)
            must(dec[i] != '/' && dec[i] != '%' && (unsigned char)dec[i] > 0x20, "name bytes");
    }

    /* Leases and the pick rule. */
    bool lok = json_in_lease_ok(f[1]);
    must(!lok || strlen(f[1]) == LK_LEASE_LEN, "lease length");
    const char *picked = NULL;
    bool conflict = size > 0 && (data[0] & 1);
    if (parse_lease_pick(f[1][0] ? f[1] : NULL, f[2][0] ? f[2] : NULL, conflict,
                         f[3][0] ? f[3] : NULL, &picked, &e)) {
        must(!conflict && json_in_lease_ok(picked), "picked lease");
        must((f[1][0] == '\0' || strcmp(f[1], picked) == 0) &&
                 (f[2][0] == '\0' || strcmp(f[2], picked) == 0) &&
                 (f[3][0] == '\0' || strcmp(f[3], picked) == 0),
             "all given leases agree");
    } else {
        must(errors_status(e.code) == 400, "lease errors are 400");
    }

    /* The list query. */
    size_t limit = 0;
    if (parse_list_query(f[1], f[2], f[3][0] ? f[3] : NULL, &limit, &e))
        must(limit >= 1 && limit <= 1000, "list limit capped at 1000");

    /* Durations as the config and lockctl accept them. */
    int64_t ms = -1;
    if (config_parse_ms(f[0], &ms) == 0)
        must(ms >= 0, "durations are not negative");

    free(dec);
    free(ref);
    for (int i = 0; i < 4; i++)
        free(f[i]);
    return 0;
}
