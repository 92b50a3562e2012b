/*
 * evheap.c - a binary min-heap over (t, seq) of fixed-size elements (see
 * evheap.h). Elements move by memcpy; the scratch element holds the one
 * being sifted.
 */
#include "evheap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const struct evheap_key *key_at(const struct evheap *h, size_t i)
{
        return (const struct evheap_key *)(h->v + i * h->size);
}

static bool before(const struct evheap_key *a, const struct evheap_key *b)
{
        return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int evheap_init(struct evheap *h, size_t elem_size)
{
        memset(h, 0, sizeof(*h));
        if (elem_size < sizeof(struct evheap_key))
                return -EINVAL;
        h->size = elem_size;
        h->tmp = malloc(elem_size);
        return h->tmp ? 0 : -ENOMEM;
}

void evheap_free(struct evheap *h)
{
        free(h->v);
        free(h->tmp);
        h->v = h->tmp = NULL;
        h->len = h->cap = 0;
}

int evheap_push(struct evheap *h, void *ev)
{
        struct evheap_key *k = ev;
        size_t i;

        if (h->len == h->cap) {
                size_t cap = h->cap ? h->cap * 2 : 1024;
                unsigned char *v = realloc(h->v, cap * h->size);

                if (!v)
                        return -ENOMEM;
                h->v = v;
                h->cap = cap;
        }
        k->seq = h->seq++;
        i = h->len++;
        while (i > 0) {
                size_t p = (i - 1) / 2;

                if (!before(k, key_at(h, p)))
                        break;
                memcpy(h->v + i * h->size, h->v + p * h->size, h->size);
                i = p;
        }
        memcpy(h->v + i * h->size, ev, h->size);
        return 0;
}

void evheap_pop(struct evheap *h, void *out)
{
        const struct evheap_key *last;
        size_t i = 0;

        memcpy(out, h->v, h->size);
        memcpy(h->tmp, h->v + --h->len * h->size, h->size);
        last = (const struct evheap_key *)h->tmp;
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                const struct evheap_key *mv = last;

                if (l < h->len && before(key_at(h, l), mv)) {
                        m = l;
                        mv = key_at(h, l);
                }
                if (r < h->len && before(key_at(h, r), mv))
                        m = r;
                if (m == i)
                        break;
                memcpy(h->v + i * h->size, h->v + m * h->size, h->size);
                i = m;
        }
        if (h->len)
                memcpy(h->v + i * h->size, h->tmp, h->size);
}

const struct evheap_key *evheap_top(const struct evheap *h)
{
        return h->len ? key_at(h, 0) : NULL;
}

void *evheap_at(const struct evheap *h, size_t i)
{
        return h->v + i * h->size;
}
