/* The egress relay: inside a sandbox allowed egress, 127.0.0.1:3128 is the way out. Each
 * connection to it is relayed, byte for byte, to the node's egress proxy through a Unix socket
 * in a host directory the launcher bound into the sandbox's own /dev (EGRESS_DIR: a directory,
 * so a proxy started again after a node restart is found at the same path); the proxy applies
 * the sandbox's allow-list. The network namespace itself stays loopback only: there is no other route out.
 *
 * Non-blocking, in the agent's poll loop: each relay is two sockets and a buffer per direction;
 * a side that reaches EOF is passed on as a half-close once its buffer has drained. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "agent.h"

#define RELAY_BUF (64 * 1024)

struct side { int fd; char buf[RELAY_BUF]; size_t len; int eof, shut; }; /* buf: bytes read from this side, for the other */
struct relay { struct side a, b; int dead; };                             /* a: the client inside, b: the proxy */

static int listen_fd = -1;
static struct relay *relays[RELAY_MAX];
static int nrelays;
static char listen_owner; /* its address marks the listening socket among the poll owners */
static int muxed; /* a VM: the relay runs over its egress port (relay-mux.c) */

int relay_start_vm(const char *port)
{
	if (mux_start(port) < 0) return -1;
	muxed = 1;
	return 0;
}

int relay_poll_timeout(void)
{
	return muxed ? mux_poll_timeout() : -1;
}

int relay_start(void)
{
	if (access(EGRESS_DIR, F_OK) < 0) return 0; /* no egress for this sandbox */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(RELAY_PORT), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) { close(fd); return -1; }
	listen_fd = fd;
	return 0;
}

static void accept_one(void)
{
	int a = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (a < 0) return;
	if (nrelays >= RELAY_MAX) { close(a); return; }
	int b = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_un su = { .sun_family = AF_UNIX };
	strcpy(su.sun_path, EGRESS_SOCKET);
	/* A Unix connect completes at once or fails (EAGAIN: the proxy's backlog is full). */
	if (b < 0 || connect(b, (struct sockaddr *)&su, sizeof su) < 0) { if (b >= 0) close(b); close(a); return; }
	struct relay *r = calloc(1, sizeof *r);
	if (!r) { close(a); close(b); return; }
	r->a.fd = a;
	r->b.fd = b;
	relays[nrelays++] = r;
}

int relay_poll_fds(struct pollfd *fds, void **owners, int max, int n)
{
	if (muxed) return mux_poll_fds(fds, owners, max, n);
	if (listen_fd >= 0 && n < max && nrelays < RELAY_MAX) {
		fds[n] = (struct pollfd){ listen_fd, POLLIN, 0 };
		owners[n++] = &listen_owner;
	}
	for (int i = 0; i < nrelays && n + 2 <= max; i++) {
		struct relay *r = relays[i];
		struct side *s[2] = { &r->a, &r->b };
		for (int k = 0; k < 2; k++) {
			struct side *me = s[k], *other = s[1 - k];
			short ev = 0;
			if (!me->eof && me->len < RELAY_BUF) ev |= POLLIN;
			if (other->len > 0) ev |= POLLOUT;
			fds[n] = (struct pollfd){ me->fd, ev, 0 };
			owners[n++] = r;
		}
	}
	return n;
}

static void step(struct relay *r, struct side *me, struct side *other, short revents)
{
	if (revents & POLLIN) {
		ssize_t got = read(me->fd, me->buf + me->len, RELAY_BUF - me->len);
		if (got > 0) me->len += (size_t)got;
		else if (got == 0 || (errno != EAGAIN && errno != EINTR)) me->eof = 1;
	} else if (revents & (POLLHUP | POLLERR)) {
		me->eof = 1;
	}
	if ((revents & POLLOUT) && other->len > 0) {
		ssize_t put = write(me->fd, other->buf, other->len);
		if (put > 0) { memmove(other->buf, other->buf + put, other->len - (size_t)put); other->len -= (size_t)put; }
		else if (put < 0 && errno != EAGAIN && errno != EINTR) r->dead = 1;
	}
	if (revents & POLLNVAL) r->dead = 1;
}

void relay_handle(void *owner, short revents, int fd)
{
	if (muxed) { mux_handle(owner, revents, fd); return; }
	if (owner == &listen_owner) {
		for (int k = 0; k < 16; k++) { int before = nrelays; accept_one(); if (nrelays == before) break; }
		return;
	}
	struct relay *r = owner;
	if (fd == r->a.fd) step(r, &r->a, &r->b, revents);
	else step(r, &r->b, &r->a, revents);
	/* A side at EOF whose bytes are all delivered: the other side hears the end of it. */
	if (r->a.eof && r->a.len == 0 && !r->b.shut) { shutdown(r->b.fd, SHUT_WR); r->b.shut = 1; }
	if (r->b.eof && r->b.len == 0 && !r->a.shut) { shutdown(r->a.fd, SHUT_WR); r->a.shut = 1; }
	if (r->a.shut && r->b.shut) r->dead = 1;
}

void relay_sweep(void)
{
	if (muxed) { mux_sweep(); return; }
	for (int i = 0; i < nrelays;) {
		struct relay *r = relays[i];
		if (!r->dead) { i++; continue; }
		close(r->a.fd);
		close(r->b.fd);
		free(r);
		relays[i] = relays[--nrelays];
	}
}
