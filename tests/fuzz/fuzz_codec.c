/*
 * fuzz_codec.c - libFuzzer target for the gradient payload decoder
 * (gossip/codec.c: gossip_codec_peek, gossip_codec_decode).
 *
 * fuzz-libs: gn_gossip
 *
 * The model size is taken from the input's own header when it is small
 * (1..4096) so the fuzzer can reach the body checks, else 64. Oracles: a
 * decoded payload covers a range inside the model, has the input's exact
 * length, holds only finite values, agrees with gossip_codec_peek(); and
 * for whole-gradient fp32 and fp16 payloads (the canonical ones) encoding
 * the decoded values again gives back the same bytes.
 *
 * The same input, read as a codec choice plus floats (non-finite ones
 * replaced), also drives the encoder for a few steps: whatever finite
 * gradient we encode, our own decoder must accept, with finite values.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/gn_endian.h"
#include "gossip/codec.h"
#include "fuzz.h"

enum { FUZZ_MODEL_MAX = 4096, FUZZ_MODEL_DEFAULT = 64 };

static void reencode_check(const uint8_t *data, size_t size,
                           const struct gossip_codec_info *info,
                           const float *out, size_t n)
{
        struct gossip_codec c;
        struct gossip_codec_cfg cfg = {.id = info->id, .n = n};
        uint8_t *buf;
        size_t len = 0;

        if (info->part_count != 1 ||
            (info->id != GOSSIP_CODEC_FP32 && info->id != GOSSIP_CODEC_FP16))
                return;
        GN_FUZZ_CHECK(gossip_codec_init(&c, &cfg) == 0);
        buf = malloc(size);
        GN_FUZZ_CHECK(buf != NULL);
        GN_FUZZ_CHECK(gossip_codec_encode(&c, 0, out, n, buf, size, &len) == 0);
        GN_FUZZ_CHECK(len == size);
        GN_FUZZ_CHECK(memcmp(buf, data, size) == 0);
        free(buf);
        gossip_codec_free(&c);
}

/* Encode data[4..] as floats with the codec data[0..3] picks; decode. */
static void encode_check(const uint8_t *data, size_t size)
{
        struct gossip_codec_cfg cfg = {0};
        struct gossip_codec c;
        struct gossip_codec_info info;
        size_t n = (size - 4) / 4, len;
        float g[256], out[256];
        uint8_t buf[20 + 8 * 256 + 4 * 256];

        if (size < 8)
                return;
        n = n > 256 ? 256 : n;
        for (size_t i = 0; i < n; i++) {
                memcpy(&g[i], data + 4 + 4 * i, 4);
                if (!isfinite(g[i]))
                        g[i] = 1.0f;
        }
        cfg.id = 1 + data[0] % 4;
        cfg.n = n;
        cfg.parts = 1 + data[1] % 4;
        cfg.block = 1 + data[2] % 64;
        cfg.k = data[3] % 8;
        cfg.error_feedback = data[0] & 0x80;
        if (cfg.parts > n)
                cfg.parts = 1;
        GN_FUZZ_CHECK(gossip_codec_init(&c, &cfg) == 0);
        for (uint64_t t = 0; t < 3; t++) {
                GN_FUZZ_CHECK(gossip_codec_encode(&c, t, g, n, buf, sizeof(buf),
                                                  &len) == 0);
                GN_FUZZ_CHECK(gossip_codec_decode(buf, len, n, out, &info) ==
                              0);
                for (size_t i = 0; i < info.count; i++)
                        GN_FUZZ_CHECK(isfinite(out[i]));
        }
        gossip_codec_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gossip_codec_info info, peek;
        size_t n = FUZZ_MODEL_DEFAULT;
        float *out;
        int rc;

        if (size >= 12) {
                uint32_t hn = gn_le32_get(data + 8);
                if (hn >= 1 && hn <= FUZZ_MODEL_MAX)
                        n = hn;
        }
        out = malloc(n * sizeof(float));
        GN_FUZZ_CHECK(out != NULL);
        rc = gossip_codec_decode(data, size, n, out, &info);
        GN_FUZZ_CHECK(rc <= 0);
        if (rc == 0) {
                GN_FUZZ_CHECK(info.lo + info.count <= n && info.count > 0);
                GN_FUZZ_CHECK(info.len == size);
                for (size_t i = 0; i < info.count; i++)
                        GN_FUZZ_CHECK(isfinite(out[i]));
                GN_FUZZ_CHECK(gossip_codec_peek(data, size, n, &peek) == 0);
                GN_FUZZ_CHECK(peek.lo == info.lo && peek.count == info.count);
                reencode_check(data, size, &info, out, n);
        }
        free(out);
        encode_check(data, size);
        return 0;
}

/* Seeds: one valid payload per codec, whole and partitioned. */
void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        static const struct {
                int id;
                uint32_t parts, block, k;
        } cfgs[] = {
            {GOSSIP_CODEC_FP32, 1, 0, 0},  {GOSSIP_CODEC_FP16, 1, 0, 0},
            {GOSSIP_CODEC_INT8, 1, 16, 0}, {GOSSIP_CODEC_TOPK, 1, 0, 6},
            {GOSSIP_CODEC_FP32, 3, 0, 0},  {GOSSIP_CODEC_INT8, 2, 0, 0},
            {GOSSIP_CODEC_TOPK, 4, 0, 2},
        };
        float g[FUZZ_MODEL_DEFAULT];
        uint8_t buf[1024];

        for (size_t i = 0; i < FUZZ_MODEL_DEFAULT; i++)
                g[i] = (float)((int)(i * 37 % 23) - 11) / 8.0f;
        for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
                struct gossip_codec_cfg cfg = {
                    .id = cfgs[i].id,
                    .n = FUZZ_MODEL_DEFAULT,
                    .parts = cfgs[i].parts,
                    .block = cfgs[i].block,
                    .k = cfgs[i].k,
                };
                struct gossip_codec c;
                size_t len;

                if (gossip_codec_init(&c, &cfg) != 0)
                        continue;
                if (gossip_codec_encode(&c, 1, g, FUZZ_MODEL_DEFAULT, buf,
                                        sizeof(buf), &len) == 0)
                        add(ctx, buf, len);
                gossip_codec_free(&c);
        }
}
