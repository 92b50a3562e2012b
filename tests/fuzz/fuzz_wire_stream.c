/*
 * fuzz_wire_stream.c - the stream decoder as the TCP transport drives it:
 * after the mode byte (see wire_fuzz.h) the input is a byte stream of
 * 4-byte big-endian lengths each followed by a frame; frames are decoded in
 * order against one replay table until the stream ends or a length header
 * is refused. The receiver has its own key set (wire_fuzz.h), so bulk
 * frames with the MAC flag are checked against K(A, B) and can be
 * accepted; the seeds include MAC'd GRADIENT, STATE and PARAMS frames.
 *
 * fuzz-libs: gn_gossip
 */
#include <stdlib.h>
#include <string.h>

#include "wire_fuzz.h"

/* A small stream bound keeps the fuzzer fast; the logic is the same. */
static const struct gossip_wire_limits lim = {0, 1 << 20};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gossip_replay *rp;
        size_t off = 1;

        wf_init();
        if (size < 1)
                return 0;
        rp = gossip_replay_new();
        GN_FUZZ_CHECK(rp != NULL);
        while (size - off >= 4) {
                uint32_t n;
                uint8_t *b;
                int err = gossip_wire_stream_get_len(data + off, &lim, &n);

                GN_FUZZ_CHECK(err == 0 || err == GOSSIP_ETOOBIG ||
                              err == GOSSIP_ESHORT);
                if (err)
                        break;
                GN_FUZZ_CHECK(n >= GOSSIP_WIRE_MAC_OVERHEAD && n <= (1 << 20));
                off += 4;
                if (size - off < n)
                        break; /* the peer hung up mid-frame */
                b = malloc(n);
                GN_FUZZ_CHECK(b != NULL);
                memcpy(b, data + off, n);
                off += n;
                if (data[0] & 1)
                        wf_resign(b, n);
                wf_check_frame(b, n, GOSSIP_CH_STREAM, &lim, rp);
                free(b);
        }
        gossip_replay_free(rp);
        return 0;
}

/* Each seed frame framed alone, then all of them as one stream. */
struct stream_seeds {
        gn_fuzz_add_fn add;
        void *ctx;
        uint8_t all[1 << 15];
        size_t n;
};

static void add_framed(void *p, const uint8_t *frame, size_t len)
{
        struct stream_seeds *s = p;
        uint8_t b[4096];

        if (len - 1 + 5 > sizeof(b))
                return;
        b[0] = frame[0];
        gossip_wire_stream_put_len(b + 1, (uint32_t)(len - 1));
        memcpy(b + 5, frame + 1, len - 1);
        s->add(s->ctx, b, len + 4);
        if (frame[0] == 1 && s->n + len + 4 <= sizeof(s->all)) {
                memcpy(s->all + s->n, b + 1, len + 3);
                s->n += len + 3;
        }
}

void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        static struct stream_seeds s;

        s.add = add;
        s.ctx = ctx;
        s.all[0] = 0;
        s.n = 1;
        wf_seed_frames(GOSSIP_CH_STREAM, add_framed, &s);
        add(ctx, s.all, s.n);
}
