/*
 * evheap.h - the event heap of the simulators in tests/sim: virtual-time
 * events popped in (time, sequence) order.
 *
 * Elements are caller-defined structs of one fixed size whose first member
 * is a struct evheap_key. The heap stamps the sequence number on push, so
 * events due at the same time come out in the order they were pushed and a
 * run is a pure function of its seed. The heap owns its array, not what
 * the elements point to: the caller frees those (evheap_at walks them).
 */
#ifndef GN_EVHEAP_H
#define GN_EVHEAP_H

#include <stddef.h>
#include <stdint.h>

struct evheap_key {
        uint64_t t;   /* virtual time, in the simulator's unit */
        uint64_t seq; /* set by evheap_push */
};

struct evheap {
        unsigned char *v; /* len elements of size bytes */
        size_t len, cap, size;
        uint64_t seq;       /* next sequence number */
        unsigned char *tmp; /* one element of scratch */
};

/* An empty heap of elements of elem_size bytes (>= sizeof(evheap_key)).
 * Returns 0 or -ENOMEM. */
int evheap_init(struct evheap *h, size_t elem_size);
/* Free the array (not what elements point to). Safe twice. */
void evheap_free(struct evheap *h);
/* Copy ev in, stamping its key's seq. Returns 0 or -ENOMEM (then the heap
 * is unchanged). */
int evheap_push(struct evheap *h, void *ev);
/* Copy the earliest element out and remove it; the heap must not be
 * empty. */
void evheap_pop(struct evheap *h, void *out);
/* The earliest element's key, or NULL when empty. */
const struct evheap_key *evheap_top(const struct evheap *h);
/* Element i (any order), for cleanup walks; i < h->len. */
void *evheap_at(const struct evheap *h, size_t i);

#endif
