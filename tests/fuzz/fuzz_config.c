/*
 * fuzz_config.c - libFuzzer target for the config file parser: any text is
 * either accepted or refused with a one-line error naming its place, what
 * was accepted prints without a control byte (--check-config), and
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
        /* What was accepted prints (secrets masked), one line per key: no
         * setting holds a control byte (--check-config prints them raw). */
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        if (f != NULL) {
            config_print(&cfg, f);
            fclose(f);
            for (size_t i = 0; i < len; i++)
                if (((unsigned char)out[i] < 0x20 && out[i] != '\n') || out[i] == 0x7f) {
                    fprintf(stderr, "fuzz_config: --check-config printed control byte 0x%02x\n",
                            (unsigned char)out[i]);
                    abort();
                }
            free(out);
        }
    }
    free(text);
    config_free(&cfg);
    return 0;
}
