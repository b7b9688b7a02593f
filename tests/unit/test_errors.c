/*
 * test_errors.c - the one table from lk_code to HTTP status, error string and
 * default message (api/errors.c): every code has its row, the rows say what
 * DESIGN.md §Errors and limits says, and no two codes share a row by
 * accident. Also lk_code_name (one log name per code) and api_error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api/errors.h"
#include "server/util.h"

/* What the API answers for each code, written out again on purpose: a change
 * to the table must change this too. */
static const struct {
    enum lk_code code;
    int status;
    const char *error;
} want[] = {
    {LK_OK, 200, "ok"},
    {LK_AGAIN, 500, "internal"},
    {LK_INTERNAL, 500, "internal"},
    {LK_INVALID, 400, "invalid_field"},
    {LK_INVALID_JSON, 400, "invalid_json"},
    {LK_UNKNOWN_FIELD, 400, "unknown_field"},
    {LK_INVALID_NAME, 400, "invalid_name"},
    {LK_CONFLICTING_LEASE, 400, "conflicting_lease"},
    {LK_BAD_CURSOR, 400, "invalid_field"},
    {LK_BODY_TOO_LARGE, 413, "body_too_large"},
    {LK_UNAUTHORIZED, 401, "unauthorized"},
    {LK_FORBIDDEN, 403, "forbidden"},
    {LK_NO_ROUTE, 404, "not_found"},
    {LK_METHOD_NOT_ALLOWED, 405, "method_not_allowed"},
    {LK_CANCELLED, 499, "client_closed"},
    {LK_LOCKED, 409, "locked"},
    {LK_HELD_BY_OTHER, 409, "held_by_other"},
    {LK_NOT_HELD, 404, "not_held"},
    {LK_SESSION_NOT_FOUND, 404, "session_not_found"},
    {LK_TOO_MANY_SESSIONS, 503, "too_many_sessions"},
    {LK_LIMIT_MISMATCH, 409, "limit_mismatch"},
    {LK_UNSUPPORTED, 400, "unsupported_by_backend"},
    {LK_BACKEND_DOWN, 503, "backend_unavailable"},
    {LK_SHUTTING_DOWN, 503, "shutting_down"},
    {LK_BAD_REQUEST, 400, "bad_request"},
    {LK_HEADERS_TOO_LARGE, 431, "headers_too_large"},
    {LK_HTTP_VERSION, 505, "http_version_not_supported"},
    {LK_BACKEND_RECOVERING, 503, "backend_recovering"},
    {LK_TOO_MANY_LOCKS, 503, "too_many_locks"},
};
#define NWANT (sizeof(want) / sizeof(want[0]))

/* Codes that answer with the same error string on purpose. Only the first
 * pair may also share the message: a parked result answered is a bug, and a
 * bug is "internal error". */
static const struct {
    enum lk_code a, b;
    bool same_message;
} shared[] = {
    {LK_AGAIN, LK_INTERNAL, true},
    {LK_INVALID, LK_BAD_CURSOR, false}, /* clients see invalid_field for both */
};

static const void *shared_pair(enum lk_code a, enum lk_code b)
{
    for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
        if ((shared[i].a == a && shared[i].b == b) || (shared[i].a == b && shared[i].b == a))
            return &shared[i];
    return NULL;
}

static void test_every_code_has_a_row(void **state)
{
    (void)state;
    const struct errors_row *fallback = errors_row(LK_INTERNAL);
    for (int c = 0; c < LK_CODE_COUNT; c++) {
        const struct errors_row *row = errors_row((enum lk_code)c);
        /* A missing row would fall back to internal's. */
        if (c != LK_INTERNAL && row == fallback)
            fail_msg("%s has no row in api/errors.c", lk_code_name((enum lk_code)c));
        assert_non_null(row->error);
        assert_true(row->error[0] != '\0');
        assert_non_null(row->message);
        assert_true(row->message[0] != '\0');
        assert_true(row->status >= 200 && row->status <= 599);
        assert_int_equal(errors_status((enum lk_code)c), row->status);
        /* Error strings are snake_case words, as clients match on them. */
        for (const char *p = row->error; *p; p++)
            assert_true((*p >= 'a' && *p <= 'z') || *p == '_');
    }
    /* Outside the enum: internal's row, never a crash. */
    assert_ptr_equal(errors_row(LK_CODE_COUNT), fallback);
    assert_ptr_equal(errors_row((enum lk_code)(LK_CODE_COUNT + 7)), fallback);
}

static void test_rows_are_the_design(void **state)
{
    (void)state;
    assert_int_equal(NWANT, LK_CODE_COUNT);
    bool seen[LK_CODE_COUNT] = {false};
    for (size_t i = 0; i < NWANT; i++) {
        const struct errors_row *row = errors_row(want[i].code);
        if (row->status != want[i].status || strcmp(row->error, want[i].error) != 0)
            fail_msg("%s: table says %d %s, DESIGN.md says %d %s", lk_code_name(want[i].code),
                     row->status, row->error, want[i].status, want[i].error);
        assert_false(seen[want[i].code]);
        seen[want[i].code] = true;
    }
    /* Error answers are errors: only LK_OK says 2xx. */
    for (int c = 1; c < LK_CODE_COUNT; c++)
        assert_true(errors_status((enum lk_code)c) >= 400);
}

/* Messages a client sees today, byte for byte (tests/cases and the
 * integration suites check the same through HTTP). */
static void test_messages(void **state)
{
    (void)state;
    assert_string_equal(errors_row(LK_BAD_CURSOR)->message,
                        "query 'cursor' must be a next_cursor this lockd gave out");
    assert_string_equal(errors_row(LK_TOO_MANY_SESSIONS)->message, "the session limit is reached");
    assert_string_equal(errors_row(LK_UNAUTHORIZED)->message, "missing or invalid bearer token");
    assert_string_equal(errors_row(LK_NO_ROUTE)->message, "no such route");
    assert_string_equal(errors_row(LK_SHUTTING_DOWN)->message, "lockd is shutting down");
    assert_string_equal(errors_row(LK_CANCELLED)->message, "the client closed the connection");
    assert_string_equal(errors_row(LK_NOT_HELD)->message,
                        "nobody holds this lock now; your lease is gone");
    assert_string_equal(errors_row(LK_INVALID_NAME)->message,
                        "lock names are 1 to 255 bytes of A-Z a-z 0-9 . _ : -");
}

static void test_no_silent_sharing(void **state)
{
    (void)state;
    for (int a = 0; a < LK_CODE_COUNT; a++) {
        for (int b = a + 1; b < LK_CODE_COUNT; b++) {
            const struct errors_row *ra = errors_row((enum lk_code)a);
            const struct errors_row *rb = errors_row((enum lk_code)b);
            const void *p = shared_pair((enum lk_code)a, (enum lk_code)b);
            bool same_error = strcmp(ra->error, rb->error) == 0;
            bool same_message = strcmp(ra->message, rb->message) == 0;
            if (same_error && p == NULL)
                fail_msg("%s and %s both answer '%s'", lk_code_name((enum lk_code)a),
                         lk_code_name((enum lk_code)b), ra->error);
            if (p == NULL)
                continue;
            assert_true(same_error);
            assert_int_equal(ra->status, rb->status);
            bool allowed = false;
            for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
                if (p == &shared[i])
                    allowed = shared[i].same_message;
            if (same_message && !allowed)
                fail_msg("%s and %s share a message", lk_code_name((enum lk_code)a),
                         lk_code_name((enum lk_code)b));
        }
    }
}

/* Logs name each code once; domain results by the API's own string. */
static void test_code_names(void **state)
{
    (void)state;
    for (int a = 0; a < LK_CODE_COUNT; a++) {
        const char *na = lk_code_name((enum lk_code)a);
        assert_non_null(na);
        assert_string_not_equal(na, "unknown");
        for (int b = a + 1; b < LK_CODE_COUNT; b++)
            assert_string_not_equal(na, lk_code_name((enum lk_code)b));
    }
    assert_string_equal(lk_code_name(LK_CODE_COUNT), "unknown");
    const enum lk_code domain[] = {LK_LOCKED,
                                   LK_HELD_BY_OTHER,
                                   LK_NOT_HELD,
                                   LK_SESSION_NOT_FOUND,
                                   LK_TOO_MANY_SESSIONS,
                                   LK_LIMIT_MISMATCH,
                                   LK_UNSUPPORTED,
                                   LK_BACKEND_DOWN,
                                   LK_SHUTTING_DOWN,
                                   LK_BACKEND_RECOVERING,
                                   LK_TOO_MANY_LOCKS};
    for (size_t i = 0; i < sizeof(domain) / sizeof(domain[0]); i++)
        assert_string_equal(lk_code_name(domain[i]), errors_row(domain[i])->error);
}

static void test_api_error(void **state)
{
    (void)state;
    struct api_error e;
    api_error_set(&e, LK_UNKNOWN_FIELD, "unknown field '%.64s'", "tll_ms");
    assert_int_equal(e.code, LK_UNKNOWN_FIELD);
    assert_string_equal(e.message, "unknown field 'tll_ms'");
    api_error_code(&e, LK_CONFLICTING_LEASE);
    assert_int_equal(e.code, LK_CONFLICTING_LEASE);
    assert_string_equal(e.message, errors_row(LK_CONFLICTING_LEASE)->message);
    char big[600];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    api_error_set(&e, LK_INVALID, "%s", big); /* cut, never overrun */
    assert_int_equal(strlen(e.message), sizeof(e.message) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_has_a_row),
        cmocka_unit_test(test_rows_are_the_design),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_no_silent_sharing),
        cmocka_unit_test(test_code_names),
        cmocka_unit_test(test_api_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
