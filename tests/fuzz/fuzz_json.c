/*
 * fuzz_json.c - libFuzzer target for request bodies: the first byte picks the
 * decoder (acquire, renew, release, session create, a multi-lock's, or the
 * json_in getters on their own), the rest is the body. Checks that a decoder either fails with an
 * error code and status set, or returns an object whose values obey the
 * limits it promises. Built by `make fuzz`; seeds in corpus/fuzz_json.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/errors.h"
#include "api/json_in.h"
#include "api/json_out.h"
#include "api/parse.h"
#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct lk_config cfg;
static int ready;

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_json: broken promise: %s\n", what);
        abort();
    }
}

static void check_error(const struct api_error *e)
{
    const struct errors_row *row = errors_row(e->code);
    must(e->code > LK_INTERNAL && e->code < LK_CODE_COUNT, "error code set");
    must(row->error != NULL && row->error[0] != '\0', "error string set");
    must(row->status == 400, "decoding errors are 400");
    must(strlen(e->message) < sizeof(e->message), "message terminated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready) {
        config_defaults(&cfg);
        ready = 1;
    }
    if (size == 0)
        return 0;
    unsigned sel = data[0] % 6;
    /* A copy with no slack: ASan sees any read past the body's end. */
    size_t len = size - 1;
    char *body = malloc(len ? len : 1);
    memcpy(body, data + 1, len);
    struct api_error e;
    memset(&e, 0, sizeof(e));
    json_t *o = NULL;
    switch (sel) {
    case 0: {
        struct parse_acquire a;
        o = parse_acquire(body, len, &cfg, &a, &e);
        if (o != NULL) {
            must(a.ttl_ms >= 100 && a.ttl_ms <= cfg.max_ttl_ms, "acquire ttl in range");
            must(a.wait_ms >= 0 && a.wait_ms <= cfg.max_wait_ms, "acquire wait in range");
            must(a.owner != NULL && strlen(a.owner) <= 128, "owner bounded");
            must(a.session == NULL || strlen(a.session) <= PARSE_SESSION_MAX, "session bounded");
            /* read-write locks and semaphores (issue 22): shared, or a limit
             * 1..PARSE_LIMIT_MAX; a semaphore has no modes */
            bool shared = strcmp(a.mode, "shared") == 0;
            must(shared || strcmp(a.mode, "exclusive") == 0, "mode is exclusive or shared");
            must(a.limit >= 1 && a.limit <= PARSE_LIMIT_MAX, "limit in range");
            must(!shared || a.limit == 1, "a semaphore has no modes");
            must(a.session != NULL || (!a.reentrant && a.max_hold_ms < 0), "session rules");
            /* The grant echoes the owner through json_out: byte for byte
             * what jansson would write for it. */
            struct jout j;
            jout_begin(&j);
            jout_str(&j, "owner", a.owner);
            size_t jl;
            char *got = jout_end(&j, &jl);
            json_t *w = json_pack("{s:s}", "owner", a.owner);
            char *want = w ? json_dumps(w, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
            must(want != NULL && jl == strlen(want) + 1 && memcmp(got, want, jl - 1) == 0,
                 "json_out writes the owner as jansson does");
            free(want);
            free(got);
            json_decref(w);
        }
        break;
    }
    case 1:
    case 2: {
        const char *bl = NULL, *lease = NULL;
        o = parse_lease_body(body, len, sel == 1, &bl, &e);
        if (o != NULL) {
            struct api_error e2;
            memset(&e2, 0, sizeof(e2));
            if (parse_lease_pick(NULL, NULL, false, bl, &lease, &e2))
                must(lease == bl && json_in_lease_ok(lease), "picked lease is well formed");
            else
                check_error(&e2);
            int64_t ttl = -1;
            if (sel == 1 && parse_renew_ttl(o, &cfg, &ttl, &e2))
                must(ttl == -1 || (ttl >= 100 && ttl <= cfg.max_ttl_ms), "renew ttl in range");
        }
        break;
    }
    case 3: {
        struct parse_session s;
        o = parse_session(body, len, &cfg, &s, &e);
        if (o != NULL) {
            must(s.ttl_ms >= 1000 && s.ttl_ms <= cfg.max_session_ttl_ms, "session ttl in range");
            must(s.lock_delay_ms >= 0 && s.lock_delay_ms <= cfg.max_ttl_ms, "delay in range");
            must(strlen(s.owner) <= 128, "owner bounded");
        }
        break;
    }
    case 5: {
        /* A multi-lock's body: 1..64 distinct valid names, or an error. */
        struct parse_multi m;
        enum parse_multi_kind kind = (enum parse_multi_kind)((data[0] / 6) % 3);
        o = parse_multi(body, len, &cfg, kind, &m, &e);
        if (o != NULL) {
            must(m.nnames >= 1 && m.nnames <= PARSE_MULTI_MAX, "names counted");
            for (size_t i = 0; i < m.nnames; i++) {
                must(lk_name_valid(m.names[i], strlen(m.names[i])), "names are lock names");
                for (size_t j = 0; j < i; j++)
                    must(strcmp(m.names[i], m.names[j]) != 0, "names are distinct");
            }
            if (kind == PM_ACQUIRE)
                must(m.ttl_ms >= 100 && m.ttl_ms <= cfg.max_ttl_ms && m.wait_ms >= 0 &&
                         m.wait_ms <= cfg.max_wait_ms,
                     "multi ttl and wait in range");
            else
                must(m.lease == NULL || strlen(m.lease) <= 64, "multi lease bounded");
        }
        break;
    }
    default: {
        /* Getters on whatever keys the object has, with odd limits. */
        o = json_in_parse(body, len, &e);
        if (o != NULL) {
            const char *key;
            json_t *v;
            json_object_foreach (o, key, v) {
                struct api_error e2;
                int64_t n = 7;
                const char *s = NULL;
                bool b = false;
                if (json_in_int(o, key, -5, 5, &n, &e2))
                    must(n >= -5 && n <= 5, "int in range");
                if (json_in_str(o, key, 3, &s, &e2) && s != NULL)
                    must(json_string_length(v) <= 3, "string bounded");
                if (json_in_bool(o, key, &b, &e2))
                    must(json_is_boolean(v) || v == NULL, "bool is bool");
                if (json_in_name(key, &e2))
                    must(lk_name_valid(key, strlen(key)), "name rule");
            }
        }
        break;
    }
    }
    if (o == NULL)
        check_error(&e);
    else
        must(json_is_object(o), "decoded body is an object");
    json_decref(o);
    free(body);
    return 0;
}
