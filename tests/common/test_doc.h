/*
 * test_doc.h - reading the test vectors out of the documentation, so that a
 * vector a third party copies from docs/protocol.md is the one the code was
 * checked against. A vector is the fenced block that follows a line
 * "<!-- vector: NAME -->". Header-only; the tests that check vectors
 * (test_wire, gossip_sched) share it.
 */
#ifndef GN_TEST_DOC_H
#define GN_TEST_DOC_H

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
static inline const char *gn_test_doc_vector(const char *doc, const char *name,
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

#endif
