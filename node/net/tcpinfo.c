/*
 * tcpinfo.c - TCP_INFO and TCP_NOTSENT_LOWAT (contract in tcpinfo.h).
 * Older kernels fill a shorter struct: optlen says which fields came, so
 * a field past it is reported as absent, never read as garbage.
 */
#include "net/tcpinfo.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <netinet/in.h>
#include <sys/socket.h>

#ifdef __linux__
#include <linux/tcp.h>

int node_tcpinfo_read(int fd, struct node_tcpinfo *out)
{
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        memset(&ti, 0, sizeof(ti));
        memset(out, 0, sizeof(*out));
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
                return -errno;
        out->rtt_us = ti.tcpi_rtt;
        if (len >= offsetof(struct tcp_info, tcpi_notsent_bytes) +
                       sizeof(ti.tcpi_notsent_bytes))
                out->notsent_bytes = ti.tcpi_notsent_bytes;
        if (len >= offsetof(struct tcp_info, tcpi_bytes_acked) +
                       sizeof(ti.tcpi_bytes_acked))
                out->bytes_acked = ti.tcpi_bytes_acked;
        if (len >= offsetof(struct tcp_info, tcpi_delivery_rate) +
                       sizeof(ti.tcpi_delivery_rate)) {
                out->has_delivery = 1;
                out->delivery_rate = ti.tcpi_delivery_rate;
                out->delivery_app_limited = ti.tcpi_delivery_rate_app_limited;
        }
        return 0;
}

int node_tcpinfo_lowat(int fd, uint32_t bytes)
{
        unsigned v = bytes;
        if (setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v)))
                return -errno;
        return 0;
}
#else
int node_tcpinfo_read(int fd, struct node_tcpinfo *out)
{
        (void)fd;
        memset(out, 0, sizeof(*out));
        return -ENOTSUP;
}

int node_tcpinfo_lowat(int fd, uint32_t bytes)
{
        (void)fd;
        (void)bytes;
        return -ENOTSUP;
}
#endif
