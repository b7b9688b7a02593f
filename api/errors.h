/*
 * errors.h - the only place that knows HTTP statuses: one table maps each
 * lk_code to a status, an error string and a default message, and answers
 * {"error": string, "message": sentence}. Any thread.
 */
#ifndef LOCKD_API_ERRORS_H
#define LOCKD_API_ERRORS_H

#include <jansson.h>

#include "server/util.h"

struct req;

/* One row of the table: what the API says for a code. */
struct errors_row {
    int status;
    const char *error;   /* the body's "error" */
    const char *message; /* the body's "message" when the caller has none */
};

/* The row for c; a code outside the enum gets LK_INTERNAL's row. Static. */
const struct errors_row *errors_row(enum lk_code c);
/* errors_row(c)->status. */
int errors_status(enum lk_code c);

/* A rejected input: the code (its status and error string come from the
 * table) and the sentence that says what was wrong. */
struct api_error {
    enum lk_code code;
    char message[256];
};

void api_error_set(struct api_error *e, enum lk_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets code with the table's default message. */
void api_error_code(struct api_error *e, enum lk_code code);

/* Answers c with its default message; extra (new reference or NULL) is
 * merged into the body. */
void errors_respond_code(struct req *r, enum lk_code c, json_t *extra);
/* Answers c with message instead of the default (copied). */
void errors_respond_msg(struct req *r, enum lk_code c, const char *message, json_t *extra);
void errors_respond_input(struct req *r, const struct api_error *e);

#endif
