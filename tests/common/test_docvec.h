/*
 * test_docvec.h - test vectors read out of a document, so that the bytes
 * a third party reads in docs/protocol.md are the bytes the code makes.
 *
 * A vector is a marker line "<!-- vector: NAME -->" followed by a fenced
 * block of lowercase hex; whitespace and anything not [0-9a-f] between the
 * fences is skipped. gn_test_print_vector() writes one in that form, for
 * regenerating a document's vectors after a deliberate format change.
 * Header-only, libc only.
 */
#ifndef GN_TEST_DOCVEC_H
#define GN_TEST_DOCVEC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file at path, NUL-terminated, in a malloc'd block (free it),
 * or NULL if it cannot be read. */
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

/* The bytes of vector name in doc, at most cap of them into out; returns
 * how many (0 when the marker or its fences are missing). */
static inline size_t gn_test_doc_vector(const char *doc, const char *name,
                                        uint8_t *out, size_t cap)
{
        char marker[64];
        const char *p, *end;
        size_t n = 0;
        int hi = -1;

        snprintf(marker, sizeof(marker), "<!-- vector: %s -->", name);
        p = strstr(doc, marker);
        if (!p)
                return 0;
        p = strstr(p, "```");
        if (!p)
                return 0;
        p = strchr(p, '\n');
        end = p ? strstr(p, "```") : NULL;
        if (!end)
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
