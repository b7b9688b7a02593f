/*
 * fuzz_config.c - libFuzzer target for the config file parser: any text is
 * either accepted or refused with a one-line error naming its place, and
 * nothing leaks (LeakSanitizer runs at exit of every libFuzzer run).
 * Built by `make fuzz`; seeds in corpus/fuzz_config.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct lk_config cfg;
    config_defaults(&cfg);
    char err[512] = "";
    /* No slack after the text: ASan sees any read past its end. */
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    int rc = config_parse_text(&cfg, text, size, "fuzz.conf", err, sizeof(err));
    if (rc != 0 && (err[0] == '\0' || strchr(err, '\n') != NULL)) {
        fprintf(stderr, "fuzz_config: a refusal must say why on one line: '%s'\n", err);
        abort();
    }
    if (rc == 0) {
        /* What was accepted prints (secrets masked) without trouble. */
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull != NULL) {
            config_print(&cfg, devnull);
            fclose(devnull);
        }
    }
    free(text);
    config_free(&cfg);
    return 0;
}
