/*
 * errors.h - the only place that knows HTTP statuses: maps lk_code and input
 * errors to {"error": code, "message": sentence} responses.
 */
#ifndef LOCKD_API_ERRORS_H
#define LOCKD_API_ERRORS_H

#include <jansson.h>

#include "server/util.h"

struct req;

/* A rejected input: code is one of the API's 400/413 error strings. */
struct api_error {
    const char *code;
    int status;
    char message[256];
};

void api_error_set(struct api_error *e, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* HTTP status for an engine result. */
int errors_status(enum lk_code c);

/* Answers an error; extra (new reference or NULL) is merged into the body. */
void errors_respond(struct req *r, int status, const char *code, const char *message,
                    json_t *extra);
void errors_respond_code(struct req *r, enum lk_code c, json_t *extra);
void errors_respond_input(struct req *r, const struct api_error *e);

#endif
