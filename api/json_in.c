/*
 * json_in.c - decoding and validation of request bodies with jansson.
 */
#include "api/json_in.h"

#include <stdbool.h>
#include <string.h>

#include "api/errors.h"
#include "server/util.h"

/* jansson refuses a number too large for it before we see its field. The
 * error position is just past the number: walk back over it, the colon and
 * the key's closing quote to find which field it was, so the answer can be
 * invalid_field naming it, like any other out-of-range value. */
static bool number_field(const char *body, size_t pos, char *key, size_t keylen)
{
    size_t i = pos;
    while (i > 0 && strchr("0123456789+-.eE", body[i - 1]) != NULL)
        i--;
    if (i == pos)
        return false;
    while (i > 0 && strchr(" \t\r\n", body[i - 1]) != NULL)
        i--;
    if (i == 0 || body[--i] != ':')
        return false;
    while (i > 0 && strchr(" \t\r\n", body[i - 1]) != NULL)
        i--;
    if (i == 0 || body[--i] != '"')
        return false;
    size_t end = i;
    while (i > 0 && (body[i - 1] == '_' || (body[i - 1] >= 'a' && body[i - 1] <= 'z')))
        i--;
    if (i == 0 || body[i - 1] != '"' || end == i || end - i >= keylen)
        return false;
    /* The opening quote must start a member of the top-level object. */
    size_t j = i - 1;
    while (j > 0 && strchr(" \t\r\n", body[j - 1]) != NULL)
        j--;
    if (j == 0 || (body[j - 1] != '{' && body[j - 1] != ','))
        return false;
    memcpy(key, body + i, end - i);
    key[end - i] = '\0';
    return true;
}

/* A form-encoded body (curl -d ttl_ms=5000): key=value pairs joined by '&',
 * keys of lowercase letters and '_'. Answers invalid_json with the same
 * fields written as JSON, so the fix is in the message. */
static bool form_hint(const char *body, size_t len, struct api_error *e)
{
    char json[160];
    size_t o = 0, i = 0;
    json[o++] = '{';
    while (i < len) {
        size_t k = i;
        while (i < len && ((body[i] >= 'a' && body[i] <= 'z') || body[i] == '_'))
            i++;
        if (i == k || i >= len || body[i] != '=')
            return false;
        size_t klen = i - k, v = ++i;
        while (i < len && body[i] != '&')
            i++;
        size_t vlen = i - v;
        bool num = vlen > 0 && vlen < 19, word = vlen == 4 || vlen == 5;
        for (size_t j = v; j < i; j++) {
            unsigned char c = (unsigned char)body[j];
            if (c < 0x20 || c == '"' || c == '\\' || c > 0x7e)
                return false;
            if (c < '0' || c > '9')
                num = false;
        }
        word =
            word && (memcmp(body + v, "true", vlen) == 0 || memcmp(body + v, "false", vlen) == 0);
        int n = snprintf(json + o, sizeof(json) - o, "%s\"%.*s\":%s%.*s%s", o > 1 ? "," : "",
                         (int)klen, body + k, num || word ? "" : "\"", (int)vlen, body + v,
                         num || word ? "" : "\"");
        if (n < 0 || (size_t)n >= sizeof(json) - o - 1)
            return false;
        o += (size_t)n;
        if (i < len)
            i++; /* '&' */
    }
    json[o++] = '}';
    json[o] = '\0';
    api_error_set(e, LK_INVALID_JSON, "body must be JSON, not a form: send %s", json);
    return true;
}

json_t *json_in_parse(const char *body, size_t len, struct api_error *e)
{
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    if (i == len)
        return json_object(); /* empty body: all defaults */
    json_error_t jerr;
    json_t *root =
        json_loadb(body, len, JSON_REJECT_DUPLICATES /* \u0000 is refused by default */, &jerr);
    if (root == NULL) {
        char key[32];
        if ((strstr(jerr.text, "too big") != NULL || strstr(jerr.text, "overflow") != NULL) &&
            jerr.position > 0 && (size_t)jerr.position <= len &&
            number_field(body, (size_t)jerr.position, key, sizeof(key))) {
            api_error_set(e, LK_INVALID, "field '%s' is out of range", key);
            return NULL;
        }
        if (form_hint(body, len, e))
            return NULL;
        /* jansson's own words for a \u0000 name its flag: say what it means. */
        if (strstr(jerr.text, "\\u0000") != NULL || strstr(jerr.text, "NUL") != NULL) {
            api_error_set(e, LK_INVALID_JSON, "strings must not contain \\u0000 (at byte %d)",
                          jerr.position);
            return NULL;
        }
        api_error_set(e, LK_INVALID_JSON, "body is not valid JSON: %s (at byte %d)", jerr.text,
                      jerr.position);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        api_error_set(e, LK_INVALID_JSON, "body must be a JSON object");
        return NULL;
    }
    return root;
}

bool json_in_fields(json_t *obj, const char *const *allowed, unsigned *present, struct api_error *e)
{
    const char *key;
    json_t *v;
    *present = 0;
    json_object_foreach (obj, key, v) {
        unsigned i = 0;
        while (allowed[i] != NULL && strcmp(allowed[i], key) != 0)
            i++;
        if (allowed[i] == NULL) {
            api_error_set(e, LK_UNKNOWN_FIELD, "unknown field '%.64s'", key);
            return false;
        }
        if (i < sizeof(*present) * 8)
            *present |= 1u << i;
    }
    return true;
}

bool json_in_only(json_t *obj, const char *const *allowed, struct api_error *e)
{
    unsigned present;
    return json_in_fields(obj, allowed, &present, e);
}

bool json_in_int(json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out,
                 struct api_error *e)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return true;
    if (!json_is_integer(v)) {
        api_error_set(e, LK_INVALID, "field '%s' must be an integer", key);
        return false;
    }
    json_int_t n = json_integer_value(v);
    if (n < min || n > max) {
        api_error_set(e, LK_INVALID, "field '%s' must be between %lld and %lld", key,
                      (long long)min, (long long)max);
        return false;
    }
    *out = n;
    return true;
}

bool json_in_str(json_t *obj, const char *key, size_t maxlen, const char **out, struct api_error *e)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return true;
    if (!json_is_string(v)) {
        api_error_set(e, LK_INVALID, "field '%s' must be a string", key);
        return false;
    }
    if (json_string_length(v) > maxlen) {
        api_error_set(e, LK_INVALID, "field '%s' must be at most %zu bytes", key, maxlen);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

bool json_in_bool(json_t *obj, const char *key, bool *out, struct api_error *e)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return true;
    if (!json_is_boolean(v)) {
        api_error_set(e, LK_INVALID, "field '%s' must be true or false", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

bool json_in_name(const char *s, struct api_error *e)
{
    if (!lk_name_valid(s, strlen(s))) {
        api_error_code(e, LK_INVALID_NAME); /* the rule, as the table words it */
        return false;
    }
    return true;
}

bool json_in_lease_ok(const char *s)
{
    if (strlen(s) != LK_LEASE_LEN)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}
