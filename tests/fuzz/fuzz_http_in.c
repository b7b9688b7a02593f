/*
 * fuzz_http_in.c - libFuzzer target for header and query values lockd reads
 * outside the JSON body: the W3C traceparent (http_trace_id, whose trace id
 * reaches the access log), the index and wait_ms query integers
 * (parse_query_int) and the Authorization bearer check (auth_check). Each is
 * compared with a reference written from its contract. The input is the
 * value, NUL-terminated as libmicrohttpd hands it over. Built by `make
 * fuzz`; seeds in corpus/fuzz_http_in.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/errors.h"
#include "api/http.h"
#include "api/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_http_in: broken promise: %s\n", what);
        abort();
    }
}

/* n lowercase hex digits at s, not all of them '0' when nonzero is set. */
static int lower_hex(const char *s, size_t n, int nonzero)
{
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
        any |= s[i] != '0';
    }
    return any || !nonzero;
}

/* The Trace Context spec's traceparent, field by field: version (2 hex, not
 * ff), trace-id (32 hex, not all zero), parent-id (16 hex, not all zero),
 * flags (2 hex); version 00 is exactly that, a later one may go on after
 * a '-'. */
static int ref_traceparent(const char *tp)
{
    size_t n = strlen(tp);
    if (n < 55 || !lower_hex(tp, 2, 0) || strncmp(tp, "ff", 2) == 0 || tp[2] != '-' ||
        !lower_hex(tp + 3, 32, 1) || tp[35] != '-' || !lower_hex(tp + 36, 16, 1) || tp[52] != '-' ||
        !lower_hex(tp + 53, 2, 0))
        return 0;
    if (strncmp(tp, "00", 2) == 0)
        return n == 55;
    return n == 55 || tp[55] == '-';
}

static const char *const tokens[] = {"tok-A", "s3cr3t.Token_2"};

static int ref_bearer(const char *v)
{
    if (strncasecmp(v, "Bearer ", 7) != 0)
        return 0;
    v += 7;
    while (*v == ' ')
        v++;
    for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++)
        if (strcmp(v, tokens[i]) == 0)
            return 1;
    return 0;
}

static void auth_setup(void)
{
    char path[] = "/tmp/fuzz_http_in.XXXXXX";
    int fd = mkstemp(path);
    must(fd >= 0, "token file");
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# tokens\n  %s\n\n%s\t\n", tokens[0], tokens[1]);
    fclose(f);
    char err[256];
    must(auth_load(path, err, sizeof(err)) == 0, "tokens load");
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        auth_setup();
        ready = 1;
    }
    /* No slack after the NUL: ASan sees any read past the value's end. */
    char *v = malloc(size + 1);
    memcpy(v, data, size);
    v[size] = '\0';

    /* traceparent: "" or the 32 lowercase hex digits, not all zero, of a
     * valid header, and exactly when the spec calls it valid. */
    char tid[33];
    memset(tid, 'x', sizeof(tid));
    http_trace_id(v, tid);
    size_t tl = strnlen(tid, sizeof(tid));
    must(tl == 0 || (tl == 32 && lower_hex(tid, 32, 1)), "trace id is 32 hex, not zero, or empty");
    must(tl == 0 || memcmp(tid, v + 3, 32) == 0, "trace id is the header's");
    must((tl == 32) == ref_traceparent(v), "trace id taken exactly from a valid traceparent");
    tid[0] = 'x';
    http_trace_id(NULL, tid);
    must(tid[0] == '\0', "no header, no trace id");

    /* index / wait_ms: digits only, and the number they spell, within max. */
    int64_t maxes[] = {0, 60000, 9007199254740991LL};
    for (size_t i = 0; i < 3; i++) {
        int64_t got = -7;
        struct api_error e;
        size_t d = strspn(v, "0123456789"), vl = strlen(v);
        int ok = parse_query_int("index", v, maxes[i], &got, &e);
        if (ok) {
            must(d >= 1 && d == vl && d <= 16, "a query integer is 1 to 16 digits");
            int64_t want = 0;
            for (size_t k = 0; k < d; k++)
                want = want * 10 + (v[k] - '0');
            must(got == want && got >= 0 && got <= maxes[i], "query integer value within max");
        } else {
            must(got == -7, "a refusal leaves the value alone");
            must(errors_status(e.code) == 400 && e.message[0] != '\0', "a refusal is 400");
            if (d == vl && d >= 1 && d <= 16) {
                int64_t want = 0;
                for (size_t k = 0; k < d; k++)
                    want = want * 10 + (v[k] - '0');
                must(want > maxes[i], "digits within max are taken");
            }
        }
    }

    /* Authorization: one of the tokens behind "Bearer ", nothing else. */
    must(auth_check(v) == ref_bearer(v), "bearer check");
    must(!auth_admin(v), "no admin tokens, no admin");

    free(v);
    return 0;
}
