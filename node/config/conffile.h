/*
 * conffile.h - gossipnode's configuration file: one "key = value" per line,
 * each key a long option's name without its dashes (docs/operations.md).
 *
 * The file is turned into command-line arguments placed before the real
 * ones, so node_options_parse() stays the only judge of values and the
 * command line wins (for getopt, the last occurrence of an option counts).
 * Each line is also parsed on its own, so a bad key or value is reported
 * with the file's name and the line's number.
 *
 * Invariants: the argv built here is owned by struct node_conf_argv and
 * lives until node_conf_argv_free(); nothing is printed.
 */
#ifndef NODE_CONFFILE_H
#define NODE_CONFFILE_H

#include <stddef.h>

#define NODE_CONF_DEFAULT  "/etc/gossipnode/gossipnode.conf"
#define NODE_CONF_LINE_MAX 1024 /* bytes per line, newline included */

struct node_conf_argv {
        int argc;
        char **argv; /* argv[0], the file's options, the command line's;
                      * every string our own copy */
};

/* Build out from the command line (argc, argv): it finds and removes
 * "--config FILE", "--config=FILE" and "--no-config"; without either it
 * reads NODE_CONF_DEFAULT if that exists. A --config FILE that cannot be
 * read is an error. 0, or -EINVAL / -ENOMEM / -errno with one line in err
 * ("FILE:LINE: what is wrong"). out is filled (and must be freed) only on
 * success. */
int node_conf_argv_build(int argc, char **argv, struct node_conf_argv *out,
                         char *err, size_t errlen);

/* Same, from the text of one file named path (for tests and the above). */
int node_conf_parse_text(const char *path, const char *text,
                         struct node_conf_argv *out, char *err, size_t errlen);

void node_conf_argv_free(struct node_conf_argv *a);

#endif
