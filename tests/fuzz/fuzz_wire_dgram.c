/*
 * fuzz_wire_dgram.c - the datagram decoder: the whole input (after the mode
 * byte, see wire_fuzz.h) is one UDP datagram.
 *
 * fuzz-libs: gn_gossip
 */
#include <stdlib.h>
#include <string.h>

#include "wire_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gossip_replay *rp;
        uint8_t *b;

        wf_init();
        if (size < 1)
                return 0;
        /* An exact-size copy: ASan sees any read past the datagram. */
        b = malloc(size - 1 ? size - 1 : 1);
        rp = gossip_replay_new();
        GN_FUZZ_CHECK(b && rp);
        memcpy(b, data + 1, size - 1);
        if (data[0] & 1)
                wf_resign(b, size - 1);
        wf_check_frame(b, size - 1, GOSSIP_CH_DGRAM, NULL, rp);
        gossip_replay_free(rp);
        free(b);
        return 0;
}

void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        wf_seed_frames(GOSSIP_CH_DGRAM, add, ctx);
}
