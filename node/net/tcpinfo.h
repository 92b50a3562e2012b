/*
 * tcpinfo.h - the kernel's view of one TCP connection (Linux TCP_INFO),
 * reduced to what the link estimator uses, and the socket option that
 * keeps the kernel's unsent queue short.
 *
 * Kept apart from net.c because the full struct tcp_info lives in
 * <linux/tcp.h>, which clashes with glibc's <netinet/tcp.h>, whose copy
 * of the struct stops before the fields we need (delivery rate, unsent
 * bytes). Elsewhere than Linux both calls return -ENOTSUP.
 */
#ifndef NODE_TCPINFO_H
#define NODE_TCPINFO_H

#include <stdint.h>

struct node_tcpinfo {
        uint32_t rtt_us;          /* smoothed RTT (srtt); 0 if none yet */
        uint64_t delivery_rate;   /* bytes/s, the last ACK's sample */
        int delivery_app_limited; /* that sample was app-limited */
        uint32_t notsent_bytes;   /* accepted, not yet sent */
        uint64_t bytes_acked;     /* since the connection began */
        int has_delivery;         /* the kernel reports the rate fields */
};

/* Read fd's TCP_INFO into *out. 0 or -errno. */
int node_tcpinfo_read(int fd, struct node_tcpinfo *out);

/* Set TCP_NOTSENT_LOWAT on fd to bytes. 0 or -errno. */
int node_tcpinfo_lowat(int fd, uint32_t bytes);

#endif
