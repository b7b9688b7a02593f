/*
 * test_input.c - lock-name validation, lease format, JSON body decoding.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/errors.h"
#include "api/http.h"
#include "api/json_in.h"
#include "api/json_out.h"
#include "server/util.h"

/* The API's error string for a rejected input, as the table answers it. */
static const char *err_of(const struct api_error *e)
{
    return errors_row(e->code)->error;
}

static void test_names(void **state)
{
    (void)state;
    assert_true(lk_name_valid("a", 1));
    assert_true(lk_name_valid("Job.nightly:backup_2-x", 22));
    assert_false(lk_name_valid("", 0));
    assert_false(lk_name_valid("a/b", 3));
    assert_false(lk_name_valid("a b", 3));
    assert_false(lk_name_valid("a%2Fb", 5));
    assert_false(lk_name_valid("a\0b", 3));
    assert_false(lk_name_valid("\xc3\xa9", 2));
    char n[300];
    memset(n, 'x', sizeof(n));
    assert_true(lk_name_valid(n, 255));
    assert_false(lk_name_valid(n, 256));
    for (int c = 0; c < 256; c++) { /* every byte, against the rule written out */
        char b = (char)c;
        bool want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
        assert_int_equal(lk_name_valid(&b, 1), want);
    }
    struct api_error e;
    assert_false(json_in_name("bad/name", &e));
    assert_int_equal(e.code, LK_INVALID_NAME);
    assert_string_equal(err_of(&e), "invalid_name");
    assert_int_equal(errors_status(e.code), 400);
}

static void test_leases(void **state)
{
    (void)state;
    char lease[LK_LEASE_LEN + 1], other[LK_LEASE_LEN + 1];
    lk_random_hex(lease, LK_LEASE_LEN / 2);
    lk_random_hex(other, LK_LEASE_LEN / 2);
    assert_int_equal(strlen(lease), 32);
    assert_true(json_in_lease_ok(lease));
    assert_string_not_equal(lease, other);
    assert_false(json_in_lease_ok("ABCDEF0123456789abcdef0123456789"));
    assert_false(json_in_lease_ok("abc"));
    assert_false(json_in_lease_ok(""));
    assert_true(lk_streq_ct(lease, lease));
    assert_false(lk_streq_ct(lease, other));
    assert_false(lk_streq_ct("abc", "abcd"));
}

static void test_json(void **state)
{
    (void)state;
    struct api_error e;
    json_t *o = json_in_parse("", 0, &e);
    assert_non_null(o);
    assert_int_equal(json_object_size(o), 0);
    json_decref(o);
    o = json_in_parse("  \n", 3, &e);
    assert_non_null(o);
    json_decref(o);

    const char *bad[] = {
        "{",    "[]",  "1", "\"s\"", "{\"a\":1,\"a\":2}", "{\"a\":\"\\u0000\"}", "{\"a\":\"\xff\"}",
        "{} x", "null"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(json_in_parse(bad[i], strlen(bad[i]), &e));
        assert_string_equal(err_of(&e), "invalid_json");
    }

    /* A number too big for jansson is the named field's invalid_field; where
     * no top-level key can be found it stays invalid_json. */
    const struct {
        const char *body, *code, *field;
    } big[] = {
        {"{\"ttl_ms\":999999999999999999999999}", "invalid_field", "'ttl_ms'"},
        {"{\"owner\":\"x\", \"wait_ms\" :\t1e400 }", "invalid_field", "'wait_ms'"},
        {"{\"ttl_ms\":-99999999999999999999999}", "invalid_field", "'ttl_ms'"},
        {"[1e400]", "invalid_json", NULL},
        {"{\"a\\\"b\":1e400}", "invalid_json", NULL},
        {"1e400", "invalid_json", NULL},
    };
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        assert_null(json_in_parse(big[i].body, strlen(big[i].body), &e));
        assert_string_equal(err_of(&e), big[i].code);
        if (big[i].field != NULL)
            assert_non_null(strstr(e.message, big[i].field));
    }

    const char *ok = "{\"ttl_ms\":500,\"owner\":\"me\",\"reentrant\":true}";
    o = json_in_parse(ok, strlen(ok), &e);
    assert_non_null(o);
    static const char *const allowed[] = {"ttl_ms", "owner", "reentrant", NULL};
    static const char *const fewer[] = {"ttl_ms", NULL};
    assert_true(json_in_only(o, allowed, &e));
    assert_false(json_in_only(o, fewer, &e));
    assert_string_equal(err_of(&e), "unknown_field");
    int64_t ttl = 1;
    assert_true(json_in_int(o, "ttl_ms", 100, 1000, &ttl, &e));
    assert_int_equal(ttl, 500);
    assert_false(json_in_int(o, "ttl_ms", 600, 1000, &ttl, &e));
    assert_string_equal(err_of(&e), "invalid_field");
    assert_non_null(strstr(e.message, "ttl_ms"));
    int64_t absent = 42;
    assert_true(json_in_int(o, "wait_ms", 0, 10, &absent, &e));
    assert_int_equal(absent, 42);
    const char *owner = NULL;
    assert_true(json_in_str(o, "owner", 128, &owner, &e));
    assert_string_equal(owner, "me");
    assert_false(json_in_str(o, "owner", 1, &owner, &e));
    assert_false(json_in_str(o, "ttl_ms", 10, &owner, &e));
    bool b = false;
    assert_true(json_in_bool(o, "reentrant", &b, &e));
    assert_true(b);
    assert_false(json_in_bool(o, "owner", &b, &e));
    assert_false(json_in_int(o, "owner", 0, 10, &ttl, &e));
    json_decref(o);

    o = json_in_parse("{\"ttl_ms\":1.5}", 14, &e);
    assert_false(json_in_int(o, "ttl_ms", 0, 10, &ttl, &e));
    json_decref(o);
}

/* json_out must write what jansson writes for the same object. */
static void test_json_out(void **state)
{
    (void)state;
    char ascii[128], ctl[301]; /* every ASCII byte; a string of only escapes */
    for (int c = 1; c < 128; c++)
        ascii[c - 1] = (char)c;
    ascii[127] = '\0';
    memset(ctl, 0x01, 300);
    ctl[300] = '\0';
    const char *vals[] = {ascii,
                          ctl,
                          "",
                          "plain",
                          "q\"uote",
                          "back\\slash",
                          "ctl\x01\x1f\b\f\n\r\t",
                          "caf\xc3\xa9",
                          "\xe2\x82\xac euro",
                          "\xf0\x9f\x94\x92 lock",
                          "/slash",
                          "\x7f del"};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        struct jout j;
        jout_begin(&j);
        jout_str(&j, "owner", vals[i]);
        jout_int(&j, "n", -9007199254740991LL);
        jout_int(&j, "z", 0);
        jout_int(&j, "big", 1795312246151213LL);
        jout_str(&j, "none", NULL);
        jout_bool(&j, "t", true);
        jout_bool(&j, "f", false);
        size_t len;
        char *got = jout_end(&j, &len);
        json_t *o = json_object();
        json_object_set_new(o, "owner", json_string(vals[i]));
        json_object_set_new(o, "n", json_integer(-9007199254740991LL));
        json_object_set_new(o, "z", json_integer(0));
        json_object_set_new(o, "big", json_integer(1795312246151213LL));
        json_object_set_new(o, "none", json_null());
        json_object_set_new(o, "t", json_true());
        json_object_set_new(o, "f", json_false());
        char *want = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        assert_non_null(want);
        assert_int_equal(len, strlen(want) + 1);
        assert_memory_equal(got, want, strlen(want));
        assert_int_equal(got[len - 1], '\n');
        free(want);
        free(got);
        json_decref(o);
    }
}

/* lk_itoa writes what "%lld" writes, at the edges of int64 too. */
static void test_itoa(void **state)
{
    (void)state;
    const int64_t vals[] = {
        0,         1,         -1,           9, 10, -10, 1795312246151213LL, 9007199254740991LL,
        INT64_MAX, INT64_MIN, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char got[24] = {0}, want[32];
        int wn = snprintf(want, sizeof(want), "%lld", (long long)vals[i]);
        assert_int_equal(lk_itoa(vals[i], got), (size_t)wn);
        assert_string_equal(got, want);
    }
    /* Every digit count, both signs, each side of a power of ten. */
    for (int64_t p = 1; p <= 1000000000000000000LL; p *= 10) {
        for (int64_t d = -1; d <= 1; d++) {
            for (int sign = -1; sign <= 1; sign += 2) {
                int64_t v = sign * (p + d);
                char got[24], want[32];
                int wn = snprintf(want, sizeof(want), "%lld", (long long)v);
                assert_int_equal(lk_itoa(v, got), (size_t)wn);
                assert_string_equal(got, want);
            }
        }
        if (p > INT64_MAX / 10)
            break;
    }
}

/* The traceparent header's trace id (the access log's trace_id): only from
 * a header the Trace Context spec calls valid, whose parent-id is not all
 * zero either (fuzz_http_in found that one accepted). */
static void test_trace_id(void **state)
{
    (void)state;
    char t[33];
    http_trace_id("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", t);
    assert_string_equal(t, "4bf92f3577b34da6a3ce929d0e0e4736");
    http_trace_id("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-next", t);
    assert_string_equal(t, "4bf92f3577b34da6a3ce929d0e0e4736");
    static const char *const invalid[] = {
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   /* parent-id zero */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   /* trace-id zero */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   /* upper case */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* 00 is 55 long */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
        "",
    };
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        memset(t, 'x', sizeof(t));
        http_trace_id(invalid[i], t);
        assert_string_equal(t, "");
    }
    http_trace_id(NULL, t);
    assert_string_equal(t, "");
}

static void test_time_and_random(void **state)
{
    (void)state;
    char out[32];
    lk_rfc3339(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000Z");
    lk_rfc3339(1795312246151LL, out);
    assert_string_equal(out, "2026-11-22T01:50:46.151Z");
    lk_rfc3339(1795312246009LL, out); /* same second, cached prefix */
    assert_string_equal(out, "2026-11-22T01:50:46.009Z");
    lk_rfc3339(1795312247999LL, out);
    assert_string_equal(out, "2026-11-22T01:50:47.999Z");
    char small[4];
    assert_int_equal(lk_strlcpy(small, "abcdef", sizeof(small)), 6);
    assert_string_equal(small, "abc");
    assert_int_equal(lk_strlcpy(small, "", sizeof(small)), 0);
    assert_string_equal(small, "");
    /* 1,000 leases (four refills of the per-thread pool): all distinct hex. */
    static char seen[1000][LK_LEASE_LEN + 1];
    for (int i = 0; i < 1000; i++) {
        lk_random_hex(seen[i], LK_LEASE_LEN / 2);
        assert_true(json_in_lease_ok(seen[i]));
        for (int k = 0; k < i; k++)
            assert_string_not_equal(seen[i], seen[k]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),    cmocka_unit_test(test_leases),
        cmocka_unit_test(test_json),     cmocka_unit_test(test_json_out),
        cmocka_unit_test(test_itoa),     cmocka_unit_test(test_time_and_random),
        cmocka_unit_test(test_trace_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
