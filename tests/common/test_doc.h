/*
 * test_doc.h - reading the test vectors out of the documentation, so that a
 * vector a third party copies from docs/protocol.md is the one the code was
 * checked against. A vector is the fenced block that follows a line
 * "<!-- vector: NAME -->": lowercase hex (gn_test_doc_vector: whitespace
 * and anything not [0-9a-f] skipped) or a table read as text
 * (gn_test_doc_text). gn_test_print_vector() writes a hex one in that form,
 * for regenerating a document's vectors after a deliberate format change.
 * Header-only, libc only; test_wire, test_cert and gossip_sched share it.
 */
#ifndef GN_TEST_DOC_H
#define GN_TEST_DOC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file at path, NUL-terminated (malloc'd), or NULL. */
static inline char *gn_test_read_file(const char *path)
{
        FILE *fp = fopen(path, "rb");
        char *s = NULL;
        long n;

        if (!fp)
                return NULL;
        if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 &&
            fseek(fp, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1))) {
                if (fread(s, 1, (size_t)n, fp) != (size_t)n) {
                        free(s);
                        s = NULL;
                } else {
                        s[n] = 0;
                }
        }
        fclose(fp);
        return s;
}

/* The text of vector `name` in doc: *end is set to its closing fence and
 * the start of its first line is returned; NULL when the doc has no such
 * vector. */
static inline const char *gn_test_doc_text(const char *doc, const char *name,
                                           const char **end)
{
        char marker[64];
        const char *p;

        snprintf(marker, sizeof(marker), "<!-- vector: %s -->", name);
        p = strstr(doc, marker);
        if (!p || !(p = strstr(p, "```")) || !(p = strchr(p, '\n')))
                return NULL;
        p++;
        *end = strstr(p, "```");
        return *end ? p : NULL;
}

/* The bytes of hex vector name in doc, at most cap of them into out;
 * returns how many (0 when the marker or its fences are missing). */
static inline size_t gn_test_doc_vector(const char *doc, const char *name,
                                        uint8_t *out, size_t cap)
{
        const char *end, *p = gn_test_doc_text(doc, name, &end);
        size_t n = 0;
        int hi = -1;

        if (!p)
                return 0;
        for (; p < end && n < cap; p++) {
                int v;

                if (*p >= '0' && *p <= '9')
                        v = *p - '0';
                else if (*p >= 'a' && *p <= 'f')
                        v = *p - 'a' + 10;
                else
                        continue;
                if (hi < 0) {
                        hi = v;
                } else {
                        out[n++] = (uint8_t)(hi << 4 | v);
                        hi = -1;
                }
        }
        return n;
}

/* Prints b[0..n) to stdout as vector name, 16 bytes a line. */
static inline void gn_test_print_vector(const char *name, const uint8_t *b,
                                        size_t n)
{
        printf("<!-- vector: %s -->\n```\n", name);
        for (size_t i = 0; i < n; i++)
                printf("%02x%s", b[i], i % 16 == 15 || i + 1 == n ? "\n" : " ");
        printf("```\n");
}

#endif
