/* The egress relay of a VM: as in a container, 127.0.0.1:3128 inside is the way out, but the
 * node's proxy is reached over a second virtio serial port (`warren.egress`) rather than a Unix
 * socket bound in: every relayed connection travels that one byte stream, multiplexed.
 *
 * Frames, both ways: conn (u32 BE) kind (u8) len (u32 BE) then len bytes (at most MUX_DATA_MAX).
 *   OPEN    guest -> host   a client connected to 127.0.0.1:3128; the host connects it to the proxy
 *   DATA    both            bytes of that connection, within the receiver's window
 *   EOF     both            that side will send no more (a half-close)
 *   CLOSE   both            the connection is gone (refused, reset, or failed): forget it once
 *                           what came before it is delivered
 *   CREDIT  both            payload u32: that many more bytes of DATA may come (the window is
 *                           MUX_WINDOW per connection and direction to begin with)
 *   HELLO   host -> guest   conn 0, payload MUX_MAGIC: a new host session; every connection of
 *                           an earlier one is dropped
 *   READY   guest -> host   conn 0, payload MUX_MAGIC: the answer; frames after it are this session's
 * Until it has read a HELLO the guest reads the port for nothing else (scanning for it, so a
 * session that began mid-frame cannot confuse it) and refuses clients: nobody relays for it.
 * The host hanging up (a node restart) is the same: the port is opened again and waits.
 * The host's side is src/backends/microvm/egress-mux.ts. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "agent.h"

#define MUX_HDR 9
#define MUX_DATA_MAX (64 * 1024)
#define MUX_WINDOW (256 * 1024)
#define MUX_MAGIC "warren-egress-1"
#define MUX_MAGIC_LEN 15
/* Stop reading clients while this much waits to go out on the port, and the port while this much came in. */
#define PORT_HIGH (1024 * 1024)
#define CREDIT_BATCH (32 * 1024)
#define RETRY_MS 100

enum { K_OPEN = 1, K_DATA, K_EOF, K_CLOSE, K_CREDIT, K_HELLO, K_READY };

struct mconn {
	uint32_t id;
	int fd;
	struct buf rx;        /* from the host, to write to the client */
	uint64_t tx_credit;   /* bytes the host may still be sent */
	uint64_t delivered;   /* bytes written to the client not yet credited back */
	int in_eof, out_eof, shut, dead, tell;
	int closing; /* the host said CLOSE: deliver what it sent before, then go */
};

static struct mconn *mc[RELAY_MAX];
static int nmc;
static const char *port_path;
static int port_fd = -1, listen_fd = -1, synced;
static int64_t retry_at;
static struct buf pin, pout;
static uint32_t next_id = 1;
static char listen_owner, port_owner;

static void frame(uint32_t id, int kind, const void *p, uint32_t n)
{
	uint8_t h[MUX_HDR] = { (uint8_t)(id >> 24), (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id, (uint8_t)kind,
		(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
	buf_put(&pout, h, sizeof h);
	if (n) buf_put(&pout, p, n);
}

static void credit(uint32_t id, uint64_t bytes)
{
	uint8_t v[4] = { (uint8_t)(bytes >> 24), (uint8_t)(bytes >> 16), (uint8_t)(bytes >> 8), (uint8_t)bytes };
	frame(id, K_CREDIT, v, 4);
}

static struct mconn *find(uint32_t id)
{
	for (int i = 0; i < nmc; i++) if (mc[i]->id == id && !mc[i]->dead) return mc[i];
	return NULL;
}

/* Drops every connection (a new session, or the host gone). */
static void drop_all(void)
{
	for (int i = 0; i < nmc; i++) { mc[i]->dead = 1; mc[i]->tell = 0; }
}

static void port_close(void)
{
	if (port_fd >= 0) close(port_fd);
	port_fd = -1;
	synced = 0;
	buf_free(&pin);
	buf_free(&pout);
	drop_all();
	retry_at = now_ms() + RETRY_MS;
}

int mux_start(const char *path)
{
	port_path = path;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(RELAY_PORT), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) { close(fd); return -1; }
	listen_fd = fd;
	return 0;
}

int mux_poll_timeout(void)
{
	if (!port_path || port_fd >= 0) return -1;
	int64_t left = retry_at - now_ms();
	return left < 0 ? 0 : (int)left;
}

int mux_poll_fds(struct pollfd *fds, void **owners, int max, int n)
{
	if (!port_path) return n;
	if (port_fd < 0 && now_ms() >= retry_at) {
		port_fd = open(port_path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (port_fd < 0) retry_at = now_ms() + RETRY_MS;
	}
	if (port_fd >= 0 && n < max) {
		short ev = buf_len(&pin) < PORT_HIGH ? POLLIN : 0;
		if (buf_len(&pout) > 0) ev |= POLLOUT;
		fds[n] = (struct pollfd){ port_fd, ev, 0 };
		owners[n++] = &port_owner;
	}
	if (listen_fd >= 0 && n < max && nmc < RELAY_MAX) {
		fds[n] = (struct pollfd){ listen_fd, POLLIN, 0 };
		owners[n++] = &listen_owner;
	}
	for (int i = 0; i < nmc && n < max; i++) {
		struct mconn *m = mc[i];
		if (m->dead) continue;
		short ev = 0;
		if (!m->in_eof && !m->closing && m->tx_credit > 0 && buf_len(&pout) < PORT_HIGH && synced) ev |= POLLIN;
		if (buf_len(&m->rx) > 0) ev |= POLLOUT;
		fds[n] = (struct pollfd){ m->fd, ev, 0 };
		owners[n++] = m;
	}
	return n;
}

static void accept_clients(void)
{
	for (int k = 0; k < 16; k++) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) return;
		struct mconn *m = synced && nmc < RELAY_MAX ? calloc(1, sizeof *m) : NULL;
		if (!m) { close(fd); continue; } /* nobody relays now: refused */
		m->id = next_id++;
		if (next_id == 0) next_id = 1;
		m->fd = fd;
		m->tx_credit = MUX_WINDOW;
		m->tell = 1;
		mc[nmc++] = m;
		frame(m->id, K_OPEN, NULL, 0);
	}
}

/* One frame from the host. */
static void on_frame(uint32_t id, int kind, const uint8_t *p, uint32_t n)
{
	if (kind == K_HELLO) { drop_all(); frame(0, K_READY, MUX_MAGIC, MUX_MAGIC_LEN); return; }
	struct mconn *m = find(id);
	if (!m) return; /* a connection already forgotten */
	switch (kind) {
	case K_DATA:
		if (m->out_eof || buf_len(&m->rx) + n > MUX_WINDOW) { m->dead = 1; break; } /* past its window */
		buf_put(&m->rx, p, n);
		break;
	case K_EOF: m->out_eof = 1; break;
	case K_CLOSE:
		m->tell = 0;
		m->out_eof = 1;
		m->closing = 1;
		if (buf_len(&m->rx) == 0) m->dead = 1;
		break;
	case K_CREDIT:
		if (n == 4) m->tx_credit += (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3];
		break;
	}
}

/* Finds the host's HELLO in what came before the session began; 1 once found. */
static int scan_hello(void)
{
	static const uint8_t hello[MUX_HDR + MUX_MAGIC_LEN] = { 0, 0, 0, 0, K_HELLO, 0, 0, 0, MUX_MAGIC_LEN,
		'w', 'a', 'r', 'r', 'e', 'n', '-', 'e', 'g', 'r', 'e', 's', 's', '-', '1' };
	const uint8_t *h = buf_head(&pin);
	size_t len = buf_len(&pin);
	const uint8_t *at = h ? memmem(h, len, hello, sizeof hello) : NULL;
	if (!at) {
		if (len > sizeof hello) buf_consume(&pin, len - sizeof hello);
		return 0;
	}
	buf_consume(&pin, (size_t)(at - h) + sizeof hello);
	drop_all();
	frame(0, K_READY, MUX_MAGIC, MUX_MAGIC_LEN);
	return 1;
}

static void port_read(void)
{
	for (int turn = 0; turn < 16 && port_fd >= 0; turn++) {
		if (buf_reserve(&pin, 64 * 1024) < 0) { port_close(); return; }
		ssize_t got = read(port_fd, pin.data + pin.end, pin.cap - pin.end);
		if (got < 0 && (errno == EAGAIN || errno == EINTR)) break;
		if (got <= 0) { port_close(); return; }
		pin.end += (size_t)got;
	}
	if (!synced && !(synced = scan_hello())) return;
	while (buf_len(&pin) >= MUX_HDR) {
		const uint8_t *h = buf_head(&pin);
		uint32_t id = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
		uint32_t n = (uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8];
		if (n > MUX_DATA_MAX) { synced = 0; drop_all(); buf_free(&pin); return; } /* lost the framing: wait for a new HELLO */
		if (buf_len(&pin) < MUX_HDR + (size_t)n) break;
		on_frame(id, h[4], h + MUX_HDR, n);
		buf_consume(&pin, MUX_HDR + (size_t)n);
	}
	buf_trim(&pin);
}

static void port_write(void)
{
	while (port_fd >= 0 && buf_len(&pout) > 0) {
		ssize_t put = write(port_fd, buf_head(&pout), buf_len(&pout));
		if (put > 0) { buf_consume(&pout, (size_t)put); continue; }
		if (put < 0 && (errno == EAGAIN || errno == EINTR)) break;
		port_close();
		return;
	}
	buf_trim(&pout);
}

static void client_event(struct mconn *m, short revents)
{
	if ((revents & POLLIN) && !m->in_eof && m->tx_credit > 0) {
		static uint8_t chunk[MUX_DATA_MAX];
		size_t want = m->tx_credit < sizeof chunk ? (size_t)m->tx_credit : sizeof chunk;
		ssize_t got = read(m->fd, chunk, want);
		if (got > 0) { frame(m->id, K_DATA, chunk, (uint32_t)got); m->tx_credit -= (uint64_t)got; }
		else if (got == 0) { frame(m->id, K_EOF, NULL, 0); m->in_eof = 1; }
		else if (errno != EAGAIN && errno != EINTR) m->dead = 1;
	}
	if ((revents & POLLOUT) && buf_len(&m->rx) > 0) {
		ssize_t put = write(m->fd, buf_head(&m->rx), buf_len(&m->rx));
		if (put > 0) { buf_consume(&m->rx, (size_t)put); m->delivered += (uint64_t)put; }
		else if (put < 0 && errno != EAGAIN && errno != EINTR) m->dead = 1;
	}
	if (!m->dead && (revents & (POLLERR | POLLNVAL))) m->dead = 1;
	if (!m->dead && (revents & POLLHUP) && !(revents & POLLIN) && buf_len(&m->rx) > 0) m->dead = 1; /* nobody reads what is left */
	if (m->delivered >= CREDIT_BATCH || (m->delivered > 0 && buf_len(&m->rx) == 0)) { credit(m->id, m->delivered); m->delivered = 0; }
	if (m->out_eof && buf_len(&m->rx) == 0 && !m->shut) { shutdown(m->fd, SHUT_WR); m->shut = 1; }
	if (m->in_eof && m->shut) { m->dead = 1; m->tell = 0; } /* both ways ended: done */
	if (m->closing && buf_len(&m->rx) == 0) m->dead = 1;
}

void mux_handle(void *owner, short revents, int fd)
{
	(void)fd;
	if (owner == &port_owner) {
		if (revents & POLLIN) port_read();
		if (port_fd >= 0 && (revents & POLLOUT)) port_write();
		/* The host hung up (or is not there): the port is opened again, for the next session. */
		if (port_fd >= 0 && (revents & (POLLHUP | POLLERR | POLLNVAL)) && !(revents & POLLIN)) port_close();
		return;
	}
	if (owner == &listen_owner) { accept_clients(); return; }
	client_event(owner, revents);
}

void mux_sweep(void)
{
	for (int i = 0; i < nmc;) {
		struct mconn *m = mc[i];
		if (!m->dead) { i++; continue; }
		if (m->tell && synced) frame(m->id, K_CLOSE, NULL, 0);
		close(m->fd);
		buf_free(&m->rx);
		free(m);
		mc[i] = mc[--nmc];
	}
	/* What the clients gave is sent at once, not at the next event of the port. */
	if (port_fd >= 0 && buf_len(&pout) > 0) port_write();
}
