/*
 * stop.c - the cluster-wide stop decision (see stop.h): pure arithmetic
 * on a LEAVE's reason and our own target.
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

int gossip_stop_take(struct gossip_stop *held, const struct gossip_stop *in,
                     uint32_t target_bp)
{
        if (held->reason != GOSSIP_STOP_NONE ||
            !gossip_stop_honoured(in, target_bp))
                return 0;
        *held = *in;
        held->origin[GOSSIP_STOP_NAME_MAX - 1] = 0;
        return 1;
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
