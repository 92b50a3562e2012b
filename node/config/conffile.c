/*
 * conffile.c - the configuration file as command-line arguments.
 *
 * Grammar, per line: blank; "# comment"; or "key = value [# comment]"
 * (spaces around '=' optional, a comment after the value must follow a
 * blank, the value may be wrapped in double quotes to keep a '#'). A key
 * is a long option's name; a flag option takes true/yes/on (given) or
 * false/no/off (left out). Whatever node_options_parse() would refuse on
 * the command line is refused here with the line's number.
 */
#include "config/conffile.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/options.h"

/* The value v is a yes-word (1), a no-word (0), or neither (-1). */
static int conf_bool(const char *v)
{
        static const char *yes[] = {"true", "yes", "on"},
                          *no[] = {"false", "no", "off"};

        for (size_t i = 0; i < 3; i++) {
                if (!strcmp(v, yes[i]))
                        return 1;
                if (!strcmp(v, no[i]))
                        return 0;
        }
        return -1;
}

/* 0 if token alone is a valid command line; else -EINVAL with its
 * complaint in err, or 1 if the complaint is about a combination of
 * options (judged later, on the whole command line). */
static int conf_token_check(const char *key, const char *token, char *err,
                            size_t errlen)
{
        struct node_options o;
        char *av[] = {"gossipnode", (char *)token, NULL};
        size_t kl = strlen(key);
        int rc;

        rc = node_options_parse(2, av, &o, err, errlen);
        if (rc == 0)
                return 0;
        if (rc > 0) /* help / version: refused before this */
                return snprintf(err, errlen,
                                "--%s: not allowed in a config "
                                "file",
                                key),
                       -EINVAL;
        if (strncmp(err, "--", 2) == 0 && strncmp(err + 2, key, kl) == 0 &&
            (err[2 + kl] == ':' || err[2 + kl] == '='))
                return -EINVAL;
        return 1;
}

static int conf_push(struct node_conf_argv *a, const char *s)
{
        char **v = realloc(a->argv, sizeof(*v) * (size_t)(a->argc + 2));

        if (!v)
                return -ENOMEM;
        a->argv = v;
        v[a->argc] = strdup(s);
        if (!v[a->argc])
                return -ENOMEM;
        v[++a->argc] = NULL;
        return 0;
}

/* Split line (modified in place) into *key and *val; NULL key for a blank
 * or comment line. 0 or a static message. */
static const char *conf_split(char *line, char **key, char **val)
{
        char *p = line, *e, *h;

        *key = *val = NULL;
        while (isspace((unsigned char)*p))
                p++;
        if (!*p || *p == '#')
                return NULL;
        *key = p;
        while (islower((unsigned char)*p) || isdigit((unsigned char)*p) ||
               *p == '-')
                p++;
        if (p == *key)
                return "expected 'key = value'";
        e = p;
        while (*p == ' ' || *p == '\t')
                p++;
        if (*p != '=')
                return "expected 'key = value'";
        *e = '\0';
        p++;
        while (*p == ' ' || *p == '\t')
                p++;
        if (*p == '"') {
                h = strchr(p + 1, '"');
                if (!h)
                        return "unterminated quote";
                *h++ = '\0';
                *val = p + 1;
                p = h;
        } else {
                *val = p;
                for (h = p; *h && !(*h == '#' && h > p &&
                                    isspace((unsigned char)h[-1]));
                     h++)
                        ;
                p = h;
        }
        while (*p == ' ' || *p == '\t')
                p++;
        if (*p && *p != '#')
                return "text after the quoted value";
        *p = '\0';
        for (e = *val + strlen(*val);
             e > *val && isspace((unsigned char)e[-1]);)
                *--e = '\0';
        return **val ? NULL : "no value";
}

/* One line: append its argument (if any) to out. */
static int conf_line(struct node_conf_argv *out, const char *path,
                     unsigned lineno, char *line, char *err, size_t errlen)
{
        char *key, *val, token[NODE_CONF_LINE_MAX + 8], why[512];
        const char *bad = conf_split(line, &key, &val);
        int b, rc;

        if (bad || !key) {
                if (bad)
                        snprintf(err, errlen, "%s:%u: %s", path, lineno, bad);
                return bad ? -EINVAL : 0;
        }
        if (!strcmp(key, "config") || !strcmp(key, "no-config") ||
            !strcmp(key, "help") || !strcmp(key, "version")) {
                snprintf(err, errlen,
                         "%s:%u: '%s' cannot be set in a config "
                         "file",
                         path, lineno, key);
                return -EINVAL;
        }
        b = conf_bool(val);
        snprintf(token, sizeof(token), "--%s", key);
        if (b >= 0 && conf_token_check(key, token, why, sizeof(why)) == 0)
                return b ? conf_push(out, token) : 0; /* a flag */
        snprintf(token, sizeof(token), "--%s=%s", key, val);
        rc = conf_token_check(key, token, why, sizeof(why));
        if (rc < 0 && strstr(why, "unknown option"))
                snprintf(why, sizeof(why),
                         "unknown key '%.*s' (keys are the "
                         "long options of --help)",
                         40, key);
        if (rc < 0) {
                snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
                return rc;
        }
        return conf_push(out, token);
}

int node_conf_parse_text(const char *path, const char *text,
                         struct node_conf_argv *out, char *err, size_t errlen)
{
        char line[NODE_CONF_LINE_MAX];
        unsigned lineno = 0;
        const char *p = text, *nl;
        size_t n;
        int rc;

        while (*p) {
                lineno++;
                nl = strchr(p, '\n');
                n = nl ? (size_t)(nl - p) : strlen(p);
                if (n >= sizeof(line)) {
                        snprintf(err, errlen,
                                 "%s:%u: line longer than %d "
                                 "bytes",
                                 path, lineno, NODE_CONF_LINE_MAX - 1);
                        return -EINVAL;
                }
                memcpy(line, p, n);
                line[n] = '\0';
                if (n && line[n - 1] == '\r')
                        line[n - 1] = '\0';
                rc = conf_line(out, path, lineno, line, err, errlen);
                if (rc)
                        return rc;
                p += n + (nl != NULL);
        }
        return 0;
}

/* Read path into a new NUL-terminated buffer (at most 1 MiB). */
static int conf_read(const char *path, char **text, char *err, size_t errlen)
{
        FILE *f = fopen(path, "r");
        size_t n;
        int rc = 0;

        *text = NULL;
        if (!f) {
                rc = -errno;
                snprintf(err, errlen, "%s: %s", path, strerror(errno));
                return rc;
        }
        *text = malloc((1u << 20) + 1);
        if (!*text) {
                rc = -ENOMEM;
                goto out;
        }
        n = fread(*text, 1, 1u << 20, f);
        if (ferror(f) || !feof(f)) {
                rc = ferror(f) ? -EIO : -EFBIG;
                snprintf(err, errlen, "%s: %s", path,
                         rc == -EIO ? "read error" : "larger than 1 MiB");
                free(*text);
                *text = NULL;
                goto out;
        }
        (*text)[n] = '\0';
out:
        fclose(f);
        return rc;
}

/* Find the --config / --no-config arguments: the file to read (NULL:
 * none) and whether it must exist. Other arguments are kept in keep[]. */
static int conf_which(int argc, char **argv, const char **path, int *must,
                      char **keep, int *nkeep, char *err, size_t errlen)
{
        *path = NODE_CONF_DEFAULT;
        *must = 0;
        *nkeep = 0;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--no-config")) {
                        *path = NULL;
                } else if (!strcmp(argv[i], "--config")) {
                        if (i + 1 >= argc) {
                                snprintf(err, errlen,
                                         "--config: needs a value");
                                return -EINVAL;
                        }
                        *path = argv[++i];
                        *must = 1;
                } else if (!strncmp(argv[i], "--config=", 9)) {
                        *path = argv[i] + 9;
                        *must = 1;
                } else {
                        keep[(*nkeep)++] = argv[i];
                }
        }
        return 0;
}

int node_conf_argv_build(int argc, char **argv, struct node_conf_argv *out,
                         char *err, size_t errlen)
{
        char **keep = calloc((size_t)argc + 1, sizeof(*keep)), *text = NULL;
        const char *path;
        int must, nkeep, rc;

        memset(out, 0, sizeof(*out));
        if (!keep)
                return -ENOMEM;
        rc = conf_which(argc, argv, &path, &must, keep, &nkeep, err, errlen);
        if (rc == 0)
                rc = conf_push(out, argc > 0 ? argv[0] : "gossipnode");
        if (rc == 0 && path) {
                rc = conf_read(path, &text, err, errlen);
                if (rc == -ENOENT && !must)
                        rc = 0; /* no default file: fine */
                if (rc == 0 && text)
                        rc = node_conf_parse_text(path, text, out, err, errlen);
        }
        for (int i = 0; rc == 0 && i < nkeep; i++)
                rc = conf_push(out, keep[i]);
        free(text);
        free(keep);
        if (rc)
                node_conf_argv_free(out);
        return rc;
}

void node_conf_argv_free(struct node_conf_argv *a)
{
        if (!a->argv)
                return;
        for (int i = 0; i < a->argc; i++)
                free(a->argv[i]);
        free(a->argv);
        memset(a, 0, sizeof(*a));
}
