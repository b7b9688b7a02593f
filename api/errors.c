/*
 * errors.c - the one table from lk_code to HTTP status, error string and
 * default message, and the error bodies built from it. No other file in api/
 * picks a status for an error. Read-only data: any thread.
 */
#include "api/errors.h"

#include <stdarg.h>
#include <stdio.h>

#include "api/http.h"

/* Indexed by code: every code of the enum has its row (test_errors checks
 * that none is missing). Strings and statuses are the API's (DESIGN.md
 * §Errors and limits); changing one changes what clients see. */
static const struct errors_row table[] = {
    [LK_OK] = {200, "ok", "no error"},
    /* A parked result must never be answered; if it is, it is a bug. */
    [LK_AGAIN] = {500, "internal", "internal error"},
    [LK_INTERNAL] = {500, "internal", "internal error"},
    [LK_INVALID] = {400, "invalid_field", "invalid request"},
    [LK_INVALID_JSON] = {400, "invalid_json", "body must be a JSON object"},
    [LK_UNKNOWN_FIELD] = {400, "unknown_field", "unknown field"},
    [LK_INVALID_NAME] = {400, "invalid_name",
                         "lock names are 1 to 255 bytes of A-Z a-z 0-9 . _ : -"},
    [LK_CONFLICTING_LEASE] = {400, "conflicting_lease",
                              "the leases sent in the header, query and body differ"},
    /* Same error string as any bad field: clients see invalid_field. */
    [LK_BAD_CURSOR] = {400, "invalid_field",
                       "query 'cursor' must be a next_cursor this lockd gave out"},
    [LK_BODY_TOO_LARGE] = {413, "body_too_large", "request body is too large"},
    [LK_UNAUTHORIZED] = {401, "unauthorized", "missing or invalid bearer token"},
    [LK_FORBIDDEN] = {403, "forbidden", "this call needs an admin token"},
    [LK_NO_ROUTE] = {404, "not_found", "no such route"},
    [LK_METHOD_NOT_ALLOWED] = {405, "method_not_allowed", "method not allowed here"},
    /* Nobody reads it: the status is what the access log and metrics show. */
    [LK_CANCELLED] = {499, "client_closed", "the client closed the connection"},
    [LK_LOCKED] = {409, "locked", "the lock is held; it was not granted"},
    [LK_HELD_BY_OTHER] = {409, "held_by_other", "another lease holds this lock now; stop using it"},
    [LK_NOT_HELD] = {404, "not_held", "nobody holds this lock now; your lease is gone"},
    [LK_SESSION_NOT_FOUND] = {404, "session_not_found", "no live session with this id"},
    [LK_TOO_MANY_SESSIONS] = {503, "too_many_sessions", "the session limit is reached"},
    [LK_LIMIT_MISMATCH] = {409, "limit_mismatch", "holders of this lock use another limit"},
    [LK_UNSUPPORTED] = {400, "unsupported_by_backend", "not supported by this backend"},
    [LK_BACKEND_DOWN] = {503, "backend_unavailable",
                         "the lock backend did not answer; nothing was granted"},
    [LK_SHUTTING_DOWN] = {503, "shutting_down", "lockd is shutting down"},
    /* libmicrohttpd picks the status of these three (api/http_own.c). */
    [LK_BAD_REQUEST] = {400, "bad_request", "the request is not well-formed HTTP/1.1"},
    [LK_HEADERS_TOO_LARGE] = {431, "headers_too_large",
                              "the request line and headers are over 8 KiB"},
    [LK_HTTP_VERSION] = {505, "http_version_not_supported", "lockd speaks HTTP/1.0 and HTTP/1.1"},
    [LK_BACKEND_RECOVERING] = {503, "backend_recovering",
                               "the lock backend restarted; lockd is re-asserting the leases it "
                               "granted, nothing new is granted until then; retry"},
    [LK_TOO_MANY_LOCKS] = {503, "too_many_locks",
                           "this lockd holds max_locks leases already; nothing was granted"},
};

_Static_assert(sizeof(table) / sizeof(table[0]) == LK_CODE_COUNT,
               "api/errors.c: one row per lk_code (the last code has no row)");

const struct errors_row *errors_row(enum lk_code c)
{
    if ((unsigned)c >= LK_CODE_COUNT || table[c].error == NULL)
        return &table[LK_INTERNAL];
    return &table[c];
}

int errors_status(enum lk_code c)
{
    return errors_row(c)->status;
}

void api_error_set(struct api_error *e, enum lk_code code, const char *fmt, ...)
{
    va_list ap;
    e->code = code;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

void api_error_code(struct api_error *e, enum lk_code code)
{
    e->code = code;
    lk_strlcpy(e->message, errors_row(code)->message, sizeof(e->message));
}

void errors_respond_msg(struct req *r, enum lk_code c, const char *message, json_t *extra)
{
    const struct errors_row *row = errors_row(c);
    json_t *o = json_object();
    json_object_set_new(o, "error", json_string(row->error));
    json_object_set_new(o, "message", json_string(message != NULL ? message : row->message));
    if (extra != NULL) {
        json_object_update(o, extra);
        json_decref(extra);
    }
    /* Every 503 says when to come back: the backend may return, another
     * lockd may take over a draining one's clients, a session may end. */
    if (row->status == 503 && !http_answer_has_header(r, "Retry-After"))
        http_add_header(r, "Retry-After", "1");
    r->error = row->error;
    http_respond_json(r, row->status, o);
}

void errors_respond_code(struct req *r, enum lk_code c, json_t *extra)
{
    errors_respond_msg(r, c, NULL, extra);
}

void errors_respond_input(struct req *r, const struct api_error *e)
{
    errors_respond_msg(r, e->code, e->message, NULL);
}
