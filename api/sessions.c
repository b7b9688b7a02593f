/*
 * sessions.c - /sessions handlers: create, heartbeat, look, end.
 */
#include <stdio.h>
#include <string.h>

#include "api/errors.h"
#include "api/http.h"
#include "api/json_in.h"
#include "api/parse.h"
#include "api/router.h"
#include "config/config.h"
#include "server/engine.h"

static json_t *names_json(const char *const *names, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(names[i]));
    return a;
}

/* The fields every session answer has (new reference). */
static json_t *session_json(const struct eng_session_view *v)
{
    char expires[32];
    lk_rfc3339(v->expires_at_ms, expires);
    json_t *o = json_object();
    json_object_set_new(o, "session", json_string(v->session));
    json_object_set_new(o, "ttl_ms", json_integer(v->ttl_ms));
    json_object_set_new(o, "expires_at", json_string(expires));
    json_object_set_new(o, "owner", json_string(v->owner));
    return o;
}

static void created_cb(void *arg, const struct eng_session_view *v)
{
    struct req *r = arg;
    if (v->code != LK_OK) { /* LK_TOO_MANY_SESSIONS is a 503 too_many_sessions */
        errors_respond_code(r, v->code, NULL);
        return;
    }
    char where[64];
    snprintf(where, sizeof(where), "/sessions/%s", v->session);
    http_add_header(r, "Location", where);
    http_respond_json(r, 201, session_json(v));
}

void sessions_create(struct req *r)
{
    struct api_error e;
    struct parse_session ps;
    json_t *body = parse_session(r->body, r->body_len, http_config(r), &ps, &e);
    if (body == NULL) {
        errors_respond_input(r, &e);
        return;
    }
    enum lk_code c =
        engine_session_create(http_engine(r), ps.ttl_ms, ps.owner, ps.lock_delay_ms, created_cb, r);
    (void)c;
    json_decref(body);
}

static void view_cb(void *arg, const struct eng_session_view *v)
{
    struct req *r = arg;
    if (v->code != LK_OK) {
        errors_respond_code(r, v->code, NULL);
        return;
    }
    json_t *o = session_json(v);
    json_object_set_new(o, "locks", names_json(v->locks, v->nlocks));
    json_object_set_new(o, "lost", names_json(v->lost, v->nlost));
    http_respond_json(r, 200, o);
}

/* Session ids are ours: 32 hex digits. Anything else is simply not found. */
static bool id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n != 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    return true;
}

static bool empty_body(struct req *r)
{
    static const char *const fields[] = {NULL};
    struct api_error e;
    json_t *body = json_in_parse(r->body, r->body_len, &e);
    if (body == NULL || !json_in_only(body, fields, &e)) {
        json_decref(body);
        errors_respond_input(r, &e);
        return false;
    }
    json_decref(body);
    return true;
}

static void look(struct req *r, bool touch)
{
    if (!empty_body(r))
        return;
    if (!id_ok(r->param)) {
        errors_respond_code(r, LK_SESSION_NOT_FOUND, NULL);
        return;
    }
    enum lk_code c = engine_session_get(http_engine(r), r->param, touch, view_cb, r);
    (void)c;
}

void sessions_heartbeat(struct req *r)
{
    look(r, true);
}
void sessions_get(struct req *r)
{
    look(r, false);
}

static void ended_cb(void *arg, const struct eng_session_view *v)
{
    struct req *r = arg;
    if (v->code != LK_OK) {
        errors_respond_code(r, v->code, NULL);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "session", json_string(v->session));
    json_object_set_new(o, "released", names_json(v->locks, v->nlocks));
    http_respond_json(r, 200, o);
}

void sessions_end(struct req *r)
{
    if (!empty_body(r))
        return;
    if (!id_ok(r->param)) {
        errors_respond_code(r, LK_SESSION_NOT_FOUND, NULL);
        return;
    }
    enum lk_code c = engine_session_end(http_engine(r), http_loop(r), r->param, ended_cb, r);
    (void)c;
}
