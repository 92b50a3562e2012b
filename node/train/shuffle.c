/*
 * shuffle.c - the sample shuffle's box (see shuffle.h): the posted batch
 * of our samples, the reservoir of received ones, and the counters, under
 * one mutex. The reservoir's policy is nn/reservoir.c.
 */
#include "train/shuffle.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "service/ctl.h"
#include "service/metrics.h"
#include "nn/reservoir.h"

struct node_shuffle {
        uint32_t r, classes, sample_bytes; /* fixed */
        size_t out_cap; /* fixed: node_shuffle_max_count(r) packed samples */
        pthread_mutex_t mu;
        /* under mu */
        uint8_t *out;
        size_t out_len; /* 0: nothing posted */
        uint64_t out_step;
        struct nn_reservoir res;
        struct node_shuffle_stats st;
};

int node_shuffle_create(struct node_shuffle **out, uint32_t r, uint32_t cap,
                        uint32_t sample_bytes, uint32_t classes, uint64_t seed)
{
        struct node_shuffle *s;

        *out = NULL;
        if (!r || r > NODE_SHUFFLE_MAX_R || !classes || classes > 256)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        if (nn_reservoir_init(&s->res, cap, sample_bytes, seed) != 0) {
                free(s);
                return -EINVAL;
        }
        s->r = r;
        s->classes = classes;
        s->sample_bytes = sample_bytes;
        s->out_cap =
            nn_samples_packed_len(node_shuffle_max_count(r), sample_bytes);
        s->out = malloc(s->out_cap);
        if (!s->out) {
                nn_reservoir_free(&s->res);
                free(s);
                return -ENOMEM;
        }
        pthread_mutex_init(&s->mu, NULL);
        s->st.per_step = r;
        s->st.reservoir_cap = cap;
        s->st.reservoir_bytes = nn_reservoir_bytes(&s->res);
        *out = s;
        return 0;
}

void node_shuffle_free(struct node_shuffle *s)
{
        if (!s)
                return;
        nn_reservoir_free(&s->res);
        free(s->out);
        pthread_mutex_destroy(&s->mu);
        free(s);
}

void node_shuffle_stats(struct node_shuffle *s, struct node_shuffle_stats *st)
{
        pthread_mutex_lock(&s->mu);
        *st = s->st;
        st->reservoir_n = s->res.n;
        pthread_mutex_unlock(&s->mu);
}

uint32_t node_shuffle_per_step(const struct node_shuffle *s)
{
        return s->r;
}

uint32_t node_shuffle_pace_count(const struct node_shuffle *s, double ratio)
{
        uint32_t hi = node_shuffle_max_count(s->r);
        double want = (double)s->r * ratio + 0.5;

        if (!(want >= (double)s->r)) /* below 1 or NaN */
                return s->r;
        return want >= (double)hi ? hi : (uint32_t)want;
}

uint32_t node_shuffle_sample_bytes(const struct node_shuffle *s)
{
        return s->sample_bytes;
}

void node_shuffle_post(struct node_shuffle *s, uint64_t step, const uint8_t *p,
                       size_t len)
{
        if (len > s->out_cap)
                return;
        pthread_mutex_lock(&s->mu);
        memcpy(s->out, p, len);
        s->out_len = len;
        s->out_step = step;
        pthread_mutex_unlock(&s->mu);
}

uint32_t node_shuffle_draw(struct node_shuffle *s, uint32_t k, uint8_t *images,
                           uint8_t *labels)
{
        uint32_t n;

        pthread_mutex_lock(&s->mu);
        n = nn_reservoir_draw(&s->res, k, images, labels);
        s->st.samples_trained += n;
        pthread_mutex_unlock(&s->mu);
        return n;
}

size_t node_shuffle_take(struct node_shuffle *s, uint8_t *buf, size_t cap,
                         uint64_t *step)
{
        size_t len = 0;

        pthread_mutex_lock(&s->mu);
        if (s->out_len && s->out_len <= cap) {
                len = s->out_len;
                memcpy(buf, s->out, len);
                *step = s->out_step;
        }
        s->out_len = 0;
        pthread_mutex_unlock(&s->mu);
        return len;
}

void node_shuffle_sent(struct node_shuffle *s, size_t len)
{
        pthread_mutex_lock(&s->mu);
        s->st.frames_sent++;
        s->st.samples_sent += len / ((size_t)s->sample_bytes + 1);
        s->st.bytes_sent += len;
        pthread_mutex_unlock(&s->mu);
}

int node_shuffle_deliver(struct node_shuffle *s, const uint8_t *p, size_t len)
{
        uint32_t kept = 0;
        int rc;

        pthread_mutex_lock(&s->mu);
        s->st.frames_received++;
        s->st.bytes_received += len;
        rc = nn_reservoir_add_packed(&s->res, p, len, s->classes, &kept);
        if (rc) {
                s->st.frames_refused++;
        } else {
                s->st.samples_received += len / ((size_t)s->sample_bytes + 1);
                s->st.samples_kept += kept;
        }
        pthread_mutex_unlock(&s->mu);
        return rc ? -EINVAL : 0;
}

/* ---- reporting (loop thread) ----------------------------------------------
 */

void node_shuffle_pack_stats(struct node_shuffle *s, msgpack_packer *pk)
{
        struct node_shuffle_stats st;

        node_shuffle_stats(s, &st);
        node_ctl_pack_str(pk, "shuffle");
        msgpack_pack_map(pk, 13);
        node_ctl_pack_ku64(pk, "per_step", st.per_step);
        node_ctl_pack_ku64(pk, "frames_sent", st.frames_sent);
        node_ctl_pack_ku64(pk, "samples_sent", st.samples_sent);
        node_ctl_pack_ku64(pk, "bytes_sent", st.bytes_sent);
        node_ctl_pack_ku64(pk, "frames_received", st.frames_received);
        node_ctl_pack_ku64(pk, "samples_received", st.samples_received);
        node_ctl_pack_ku64(pk, "bytes_received", st.bytes_received);
        node_ctl_pack_ku64(pk, "samples_kept", st.samples_kept);
        node_ctl_pack_ku64(pk, "frames_refused", st.frames_refused);
        node_ctl_pack_ku64(pk, "samples_trained", st.samples_trained);
        node_ctl_pack_ku64(pk, "reservoir_samples", st.reservoir_n);
        node_ctl_pack_ku64(pk, "reservoir_cap", st.reservoir_cap);
        node_ctl_pack_ku64(pk, "reservoir_bytes", st.reservoir_bytes);
}

void node_shuffle_metrics(struct node_shuffle *s, struct node_metrics_buf *b)
{
        struct node_shuffle_stats st;

        node_shuffle_stats(s, &st);
        node_metrics_counter(b, "shuffle_samples_sent_total",
                             "Raw training samples sent to partners",
                             st.samples_sent);
        node_metrics_counter(b, "shuffle_bytes_sent_total",
                             "Bytes of raw samples sent (payload)",
                             st.bytes_sent);
        node_metrics_counter(b, "shuffle_samples_received_total",
                             "Raw samples received from partners",
                             st.samples_received);
        node_metrics_counter(b, "shuffle_frames_refused_total",
                             "SAMPLES frames refused (length, label, off)",
                             st.frames_refused);
        node_metrics_counter(b, "shuffle_samples_trained_total",
                             "Reservoir samples drawn into our batches",
                             st.samples_trained);
        node_metrics_gauge(b, "shuffle_reservoir_samples",
                           "Samples in the reservoir now",
                           (double)st.reservoir_n);
        node_metrics_gauge(b, "shuffle_reservoir_bytes",
                           "Bytes allocated for the reservoir (fixed)",
                           (double)st.reservoir_bytes);
}
