/*
 * stop.c - the cluster-wide stop decision (see stop.h): pure arithmetic
 * on the LEAVE reasons heard, who signed them, our own target and our
 * own evaluation.
 */
#include "gossip/stop.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

uint32_t gossip_stop_bp(double percent)
{
        if (!(percent > 0))
                return 0;
        if (percent >= 100.0)
                return 10000;
        return (uint32_t)lround(percent * 100.0);
}

int gossip_stop_honoured(const struct gossip_stop *s, uint32_t target_bp)
{
        return s && s->reason == GOSSIP_STOP_TARGET && target_bp > 0 &&
               s->acc_bp >= target_bp;
}

int gossip_stop_count(struct gossip_stop_tally *t,
                      const uint8_t key[GOSSIP_KEY_BYTES], const char *name,
                      const struct gossip_stop *s, uint32_t target_bp)
{
        size_t olen = strnlen(s ? s->origin : "", GOSSIP_STOP_NAME_MAX - 1);

        if (!gossip_stop_honoured(s, target_bp) ||
            t->n >= GOSSIP_STOP_ORIGINS_MAX)
                return 0;
        for (size_t i = 0; i < t->n; i++)
                if (memcmp(t->keys[i], key, GOSSIP_KEY_BYTES) == 0)
                        return 0;
        memcpy(t->keys[t->n], key, GOSSIP_KEY_BYTES);
        if (olen == 0 || (name && strlen(name) == olen &&
                          memcmp(name, s->origin, olen) == 0))
                t->votes++;
        if (t->n++ == 0) {
                t->first = *s;
                t->first.origin[GOSSIP_STOP_NAME_MAX - 1] = 0;
                if (olen == 0 && name) /* an unnamed origin: the signer */
                        snprintf(t->first.origin, sizeof(t->first.origin), "%s",
                                 name);
        }
        return 1;
}

size_t gossip_stop_quorum(size_t members)
{
        size_t half = members / 2 + members % 2;

        return half > 2 ? half : 2;
}

int gossip_stop_decide(const struct gossip_stop_tally *t, size_t alive,
                       uint32_t own_bp, uint32_t target_bp,
                       struct gossip_stop_verdict *v)
{
        struct gossip_stop_verdict w = {0};

        w.have = t->votes;
        w.need = gossip_stop_quorum(alive + t->n);
        w.own_bp = own_bp;
        w.target_bp = target_bp;
        w.floor_bp = target_bp > GOSSIP_STOP_MARGIN_BP
                         ? target_bp - GOSSIP_STOP_MARGIN_BP
                         : 0;
        if (t->n == 0 || target_bp == 0)
                w.rule = GOSSIP_STOP_WAIT;
        else if (w.have >= w.need)
                w.rule = GOSSIP_STOP_BY_QUORUM;
        else if (own_bp != GOSSIP_STOP_NO_EVAL && own_bp >= w.floor_bp)
                w.rule = GOSSIP_STOP_BY_OWN;
        else
                w.rule = GOSSIP_STOP_WAIT;
        if (v)
                *v = w;
        return w.rule;
}

int gossip_stop_recheck_due(const struct gossip_stop_tally *t, double since_s,
                            double eval_s)
{
        if (!t || t->n == 0)
                return 0;
        return !(eval_s > 0) || since_s >= GOSSIP_STOP_RECHECK_TIMES * eval_s;
}

int gossip_stop_format_wait(const struct gossip_stop_verdict *v, char *buf,
                            size_t len)
{
        if (v->own_bp == GOSSIP_STOP_NO_EVAL)
                return snprintf(buf, len, "%zu of %zu votes needed", v->have,
                                v->need);
        return snprintf(buf, len,
                        "%zu of %zu votes needed, our accuracy %.2f%% < "
                        "%.2f%% (target %.2f%% less %.2f points)",
                        v->have, v->need, v->own_bp / 100.0,
                        v->floor_bp / 100.0, v->target_bp / 100.0,
                        GOSSIP_STOP_MARGIN_BP / 100.0);
}

int gossip_stop_format(const struct gossip_stop *s, char *buf, size_t len)
{
        const char *who = s->origin[0] ? s->origin : "a peer";

        return snprintf(buf, len,
                        "stopped: %.31s reached target %.1f%% at step %llu "
                        "(test accuracy %.2f%%)",
                        who, s->target_bp / 100.0, (unsigned long long)s->step,
                        s->acc_bp / 100.0);
}
