/*
 * errors.c - status codes and error bodies.
 */
#include "api/errors.h"

#include <stdarg.h>
#include <stdio.h>

#include "api/http.h"

void api_error_set(struct api_error *e, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    e->code = code;
    e->status = status;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

int errors_status(enum lk_code c)
{
    switch (c) {
    case LK_OK: return 200;
    case LK_INVALID: return 400;
    case LK_UNSUPPORTED: return 400;
    case LK_NOT_HELD: return 404;
    case LK_SESSION_NOT_FOUND: return 404;
    case LK_NOT_FOUND: return 404;
    case LK_LOCKED: return 409;
    case LK_HELD_BY_OTHER: return 409;
    case LK_LIMIT_MISMATCH: return 409;
    case LK_BACKEND_DOWN: return 503;
    case LK_SHUTTING_DOWN: return 503;
    case LK_AGAIN:
    case LK_INTERNAL:
    case LK_CANCELLED: return 500;
    }
    return 500;
}

static const char *message_of(enum lk_code c)
{
    switch (c) {
    case LK_LOCKED: return "the lock is held; it was not granted";
    case LK_HELD_BY_OTHER: return "another lease holds this lock now; stop using it";
    case LK_NOT_HELD: return "nobody holds this lock now; your lease is gone";
    case LK_SESSION_NOT_FOUND: return "no live session with this id";
    case LK_NOT_FOUND: return "not found";
    case LK_BACKEND_DOWN: return "the lock backend did not answer; nothing was granted";
    case LK_SHUTTING_DOWN: return "lockd is shutting down";
    case LK_LIMIT_MISMATCH: return "holders of this lock use another limit";
    case LK_UNSUPPORTED: return "not supported by this backend";
    case LK_INVALID: return "invalid request";
    default: return "internal error";
    }
}

void errors_respond(struct req *r, int status, const char *code, const char *message, json_t *extra)
{
    json_t *o = json_object();
    json_object_set_new(o, "error", json_string(code));
    json_object_set_new(o, "message", json_string(message));
    if (extra != NULL) {
        json_object_update(o, extra);
        json_decref(extra);
    }
    http_respond_json(r, status, o);
}

void errors_respond_code(struct req *r, enum lk_code c, json_t *extra)
{
    const char *code = c == LK_INVALID                                          ? "invalid_field"
                       : c == LK_INTERNAL || c == LK_AGAIN || c == LK_CANCELLED ? "internal"
                                                                                : lk_code_name(c);
    errors_respond(r, errors_status(c), code, message_of(c), extra);
}

void errors_respond_input(struct req *r, const struct api_error *e)
{
    errors_respond(r, e->status, e->code, e->message, NULL);
}
