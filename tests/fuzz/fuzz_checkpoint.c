/*
 * fuzz_checkpoint.c - libFuzzer target for the model-state decoder
 * (nn/checkpoint.c: nn_checkpoint_peek_size, nn_checkpoint_decode).
 *
 * fuzz-libs: gn_nn gn::sodium
 *
 * The same bytes arrive from a joining peer over the network (STATE), so the
 * decoder must survive anything. Oracles: a decode that succeeds describes
 * exactly the input (re-encoding gives the same bytes), holds only finite
 * floats and never more than the caller's float limit; peek agrees with the
 * decoded total.
 *
 * The first input byte is a mode: with bit 0 set the rest is first made
 * self-consistent (magic, version, sizes adding up to the length, BLAKE2b
 * trailer), so that mutations get past the checksum to the field checks.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "base/gn_endian.h"
#include "nn/checkpoint.h"
#include "fuzz.h"

enum { FUZZ_MAX_FLOATS = 1 << 16 };

/* Header offsets as in docs/formats.md: total 8, spec/meta lengths 40/44,
 * parameter/optimizer counts 48/56, 64-byte header, 32-byte digest. */
static void make_consistent(uint8_t *b, size_t n)
{
        size_t room = n - 96, sl, ml, fl;
        uint64_t nf, no;

        sl = gn_le32_get(b + 40) % (room + 1);
        ml = gn_le32_get(b + 44) % (room - sl + 1);
        fl = room - sl - ml;
        ml += fl % 4;
        nf = fl / 4;
        no = nf ? gn_le32_get(b + 56) % (nf + 1) : 0;
        memcpy(b, "GNCK", 4);
        gn_le32_put(b + 4, 1);
        gn_le64_put(b + 8, n);
        gn_le32_put(b + 40, (uint32_t)sl);
        gn_le32_put(b + 44, (uint32_t)ml);
        gn_le64_put(b + 48, nf - no);
        gn_le64_put(b + 56, no);
        crypto_generichash(b + n - 32, 32, b, n - 32, NULL, 0);
}

static int check_one(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t n)
{
        uint8_t *b;

        if (n < 1)
                return 0;
        b = malloc(n);
        GN_FUZZ_CHECK(b != NULL);
        memcpy(b, in + 1, n - 1);
        if ((in[0] & 1) && n - 1 >= 96)
                make_consistent(b, n - 1);
        check_one(b, n - 1);
        free(b);
        return 0;
}

static int check_one(const uint8_t *data, size_t size)
{
        struct nn_checkpoint ck;
        char err[256];
        uint64_t total = 0;
        uint8_t *again;
        size_t len = 0;
        int rc;

        memset(&ck, 0, sizeof(ck));
        rc = nn_checkpoint_decode(data, size, FUZZ_MAX_FLOATS, "fuzz", &ck, err,
                                  sizeof(err));
        if (rc != 0) {
                GN_FUZZ_CHECK(rc < 0 && err[0] != '\0');
                return 0;
        }
        GN_FUZZ_CHECK(ck.n_params + ck.n_opt <= FUZZ_MAX_FLOATS);
        for (uint64_t i = 0; i < ck.n_params; i++)
                GN_FUZZ_CHECK(isfinite(ck.params[i]));
        for (uint64_t i = 0; i < ck.n_opt; i++)
                GN_FUZZ_CHECK(isfinite(ck.opt[i]));
        GN_FUZZ_CHECK(nn_checkpoint_peek_size(data, size, &total) == 0);
        GN_FUZZ_CHECK(total == size);
        GN_FUZZ_CHECK(nn_checkpoint_encoded_size(&ck) == size);
        again = malloc(size);
        GN_FUZZ_CHECK(again != NULL);
        GN_FUZZ_CHECK(nn_checkpoint_encode(&ck, again, size, &len) == 0);
        GN_FUZZ_CHECK(len == size && memcmp(again, data, size) == 0);
        free(again);
        nn_checkpoint_free(&ck);
        return 0;
}

/* Seeds: a few valid checkpoints of different shapes. */
void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        static const char *specs[] = {"4-3-2", "784-512-10", "cnn"};
        for (unsigned s = 0; s < 3; s++) {
                float params[12], opt[12];
                uint8_t meta[3] = {1, 2, 3};
                struct nn_checkpoint ck = {
                    .spec = (char *)specs[s],
                    .step = 7 + s,
                    .epoch = s,
                    .seed = 42,
                    .params = params,
                    .n_params = 4 + 4 * s,
                    .opt = opt,
                    .n_opt = s == 0 ? 0 : 4 + 4 * s,
                    .meta = meta,
                    .meta_len = s,
                };
                uint8_t buf[512];
                size_t len = 0;

                buf[0] = 0; /* mode byte: as is */
                for (int i = 0; i < 12; i++) {
                        params[i] = (float)i * 0.25f - 1.0f;
                        opt[i] = (float)i * -0.5f;
                }
                if (nn_checkpoint_encode(&ck, buf + 1, sizeof(buf) - 1, &len) ==
                    0)
                        add(ctx, buf, len + 1);
        }
}
