/* The agent's event loop: accepts connections, cuts the byte stream into frames, dispatches
 * the requests (decoded by request.c), and writes replies. Single-threaded around poll(2); nothing here
 * blocks except file operations on the sandbox's own file system. A bad frame costs the sender
 * an error reply, never the agent. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "agent.h"
#include "request.h"
#include "sandbox.h"

/* Stop taking requests from a connection while this much of its output is unsent. */
#define IN_PAUSE_OUT_BYTES (8 * 1024 * 1024)
#define READ_CHUNK (64 * 1024)
#define MAX_POLL (2 + WARREN_MAX_CONNS + 5 * WARREN_MAX_EXECS + 1 + 2 * RELAY_MAX)
/* How long a stream device (VM port) that hung up is left before it is opened again. */
#define STREAM_RETRY_MS 100

int agent_in_vm;

static struct conn *conns[WARREN_MAX_CONNS];
static int nconns;

int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- replies ---- */

size_t frame_begin(struct conn *c)
{
	size_t mark = buf_len(&c->out);
	static const uint8_t zero[4];
	buf_put(&c->out, zero, 4);
	return mark;
}

void frame_end(struct conn *c, size_t mark)
{
	if (c->out.oom) { c->dead = 1; return; }
	uint8_t *p = buf_head(&c->out) + mark;
	size_t n = buf_len(&c->out) - mark - 4;
	p[0] = (uint8_t)(n >> 24); p[1] = (uint8_t)(n >> 16); p[2] = (uint8_t)(n >> 8); p[3] = (uint8_t)n;
}

static void vsend_err(struct conn *c, uint64_t id, const char *code, const char *field, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	size_t m = frame_begin(c);
	mp_w_map(&c->out, field ? 5 : 4);
	mp_w_cstr(&c->out, "t"); mp_w_cstr(&c->out, "err");
	mp_w_cstr(&c->out, "id"); mp_w_u64(&c->out, id);
	mp_w_cstr(&c->out, "code"); mp_w_cstr(&c->out, code);
	mp_w_cstr(&c->out, "message"); mp_w_text(&c->out, msg, strlen(msg));
	if (field) { mp_w_cstr(&c->out, "field"); mp_w_cstr(&c->out, field); }
	frame_end(c, m);
}

void send_err(struct conn *c, uint64_t id, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsend_err(c, id, code, NULL, fmt, ap);
	va_end(ap);
}

void send_err_field(struct conn *c, uint64_t id, const char *code, const char *field, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsend_err(c, id, code, field, fmt, ap);
	va_end(ap);
}

const char *errno_code(int err)
{
	switch (err) {
	case ENOENT: case ENOTDIR: case ESRCH: return ERR_NOT_FOUND;
	case EACCES: case EPERM: case EROFS: case ETXTBSY: return ERR_FORBIDDEN;
	/* The sandbox's own disk is full: its limit, not the cluster's room (send_errno names it). */
	case ENOSPC: case EDQUOT: return ERR_QUOTA;
	case EFBIG: case ENOMEM: case EMFILE: case ENFILE: case EAGAIN: return ERR_NO_CAPACITY;
	case EEXIST: case EISDIR: case ENOTEMPTY: case EINVAL: case ENAMETOOLONG: case ELOOP:
	case EBUSY: case EXDEV: case ENOEXEC: case E2BIG: case ENXIO: return ERR_INVALID;
	case ENOTSUP: case ENOSYS: case ENOTTY: return ERR_UNSUPPORTED;
	/* The sandbox's file system failed the call (a layer chunk that cannot be fetched, a
	 * kernel file that refuses reads): the sandbox's fault or its storage's, not a bug here. */
	case EIO: return ERR_UNAVAILABLE;
	default: return ERR_INTERNAL;
	}
}

/* Every errno refusal is about the request's path (a rename's too: its source), but a full
 * disk, which is about the sandbox's limits.diskMiB. */
void send_errno(struct conn *c, uint64_t id, int err, const char *what, const char *path)
{
	const char *field = err == ENOSPC || err == EDQUOT ? "limits.diskMiB" : "path";
	send_err_field(c, id, errno_code(err), field, "%s %s: %s", what, path, strerror(err));
}

void send_ok(struct conn *c, uint64_t id)
{
	size_t m = frame_begin(c);
	mp_w_map(&c->out, 2);
	mp_w_cstr(&c->out, "t"); mp_w_cstr(&c->out, "ok");
	mp_w_cstr(&c->out, "id"); mp_w_u64(&c->out, id);
	frame_end(c, m);
}

int take_field_path(struct conn *c, const struct req *q, const struct field *f, const char *name, char out[WARREN_MAX_PATH + 1])
{
	if (!f->set || f->n == 0) { send_err_field(c, q->id, ERR_INVALID, name, "%s is required", name); return -1; }
	if (f->n > WARREN_MAX_PATH) { send_err_field(c, q->id, ERR_INVALID, name, "%s longer than %d bytes", name, WARREN_MAX_PATH); return -1; }
	if (memchr(f->p, 0, f->n)) { send_err_field(c, q->id, ERR_INVALID, name, "%s contains NUL", name); return -1; }
	memcpy(out, f->p, f->n);
	out[f->n] = 0;
	return 0;
}

int take_path(struct conn *c, const struct req *q, char out[WARREN_MAX_PATH + 1])
{
	return take_field_path(c, q, &q->path, "path", out);
}

static void send_pong(struct conn *c, uint64_t id)
{
	size_t m = frame_begin(c);
	mp_w_map(&c->out, 4);
	mp_w_cstr(&c->out, "t"); mp_w_cstr(&c->out, "ok");
	mp_w_cstr(&c->out, "id"); mp_w_u64(&c->out, id);
	mp_w_cstr(&c->out, "version"); mp_w_u64(&c->out, WARREN_PROTOCOL_VERSION);
	mp_w_cstr(&c->out, "pid"); mp_w_u64(&c->out, (uint64_t)getpid());
	frame_end(c, m);
}

/* Renames the sandbox: 0, or -1 after replying with why. */
static int rename_to(struct conn *c, const struct req *q)
{
	if (!q->name.p || q->name.n == 0 || q->name.n > 63) { send_err_field(c, q->id, ERR_INVALID, "name", "name must be 1-63 bytes"); return -1; }
	for (uint32_t i = 0; i < q->name.n; i++) {
		char ch = q->name.p[i];
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_';
		if (!ok) { send_err_field(c, q->id, ERR_INVALID, "name", "name must be of [A-Za-z0-9._-]"); return -1; }
	}
	if (sandbox_rename(q->name.p, q->name.n) < 0) { send_errno(c, q->id, errno, "sethostname", NULL); return -1; }
	return 0;
}

/* Renames the sandbox: a pooled sandbox takes the id of the sandbox it becomes. */
static void set_hostname(struct conn *c, const struct req *q)
{
	if (rename_to(c, q) == 0) send_ok(c, q->id);
}

/* A VM started from a saved one (or kept in a pool, or paused) takes what must be its own:
 * its name, fresh randomness mixed into the kernel's pool and the generator reseeded (else
 * every VM restored from one state would draw the same numbers), and the host's time (the
 * saved clock stopped when the state was saved). A container shares the host's clock and
 * kernel: it may only be renamed. */
static void set_identity(struct conn *c, const struct req *q)
{
	if (!agent_in_vm && (q->seed.set || q->has_time)) { send_err_field(c, q->id, ERR_UNSUPPORTED, q->seed.set ? "seed" : "timeMs", "only a VM has a clock and a random pool of its own"); return; }
	if (q->name.set && rename_to(c, q) < 0) return;
	if (q->seed.set && q->seed.n > 0) {
		if (q->seed.n > 512) { send_err_field(c, q->id, ERR_INVALID, "seed", "seed must be at most 512 bytes"); return; }
		/* struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; } (linux/random.h) */
		struct { int entropy_count, buf_size; uint8_t buf[512]; } pool;
		pool.entropy_count = (int)q->seed.n * 8;
		pool.buf_size = (int)q->seed.n;
		memcpy(pool.buf, q->seed.p, q->seed.n);
		int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
		/* RNDADDENTROPY = _IOW('R', 3, int[2]); RNDRESEEDCRNG = _IO('R', 7) */
		int bad = fd < 0 || ioctl(fd, 0x40085203, &pool) < 0 || ioctl(fd, 0x5207) < 0;
		int err = errno;
		if (fd >= 0) close(fd);
		if (bad) { send_errno(c, q->id, err, "reseed", "/dev/urandom"); return; }
	}
	if (q->has_time) {
		struct timespec ts = { (time_t)(q->time_ms / 1000), (long)(q->time_ms % 1000) * 1000000L };
		if (clock_settime(CLOCK_REALTIME, &ts) < 0) { send_errno(c, q->id, errno, "clock_settime", "CLOCK_REALTIME"); return; }
	}
	send_ok(c, q->id);
}

static void handle_frame(struct conn *c, const uint8_t *p, size_t n)
{
	struct mp_in r = { p, p + n };
	struct req q;
	memset(&q, 0, sizeof q);
	q.mkdirs = 1;
	char why[160];
	const char *bad = parse_req(&r, &q, why, sizeof why);
	if (bad) { send_err(c, q.has_id ? q.id : 0, ERR_MALFORMED, "%s", bad); return; }
	const char *t = q.t.p;
	uint32_t tl = q.t.n;
	if (key_is(t, tl, "ping")) send_pong(c, q.id);
	else if (key_is(t, tl, "exec")) exec_start(c, &q);
	else if (key_is(t, tl, "stdin")) exec_stdin(c, &q);
	else if (key_is(t, tl, "kill")) exec_kill(c, &q);
	else if (key_is(t, tl, "credit")) exec_credit(c, &q);
	else if (key_is(t, tl, "resize")) exec_resize(c, &q);
	else if (key_is(t, tl, "read")) file_read(c, &q);
	else if (key_is(t, tl, "write")) file_write(c, &q);
	else if (key_is(t, tl, "list")) file_list(c, &q);
	else if (key_is(t, tl, "stat")) file_stat(c, &q);
	else if (key_is(t, tl, "remove")) file_remove(c, &q);
	else if (key_is(t, tl, "mkdir")) file_mkdir(c, &q);
	else if (key_is(t, tl, "rename")) file_rename(c, &q);
	else if (key_is(t, tl, "symlink")) file_symlink(c, &q);
	else if (key_is(t, tl, "hostname")) set_hostname(c, &q);
	else if (key_is(t, tl, "identity")) set_identity(c, &q);
	else if (key_is(t, tl, "tree")) exec_tree(c, &q);
	else if (key_is(t, tl, "execs")) exec_list(c, &q);
	else if (key_is(t, tl, "attach")) exec_attach(c, &q);
	else if (key_is(t, tl, "ack")) exec_ack(c, &q);
	else send_err(c, q.id, ERR_UNKNOWN_KIND, "unknown kind \"%.*s\"", (int)(tl > 40 ? 40 : tl), t);
}

/* Cuts complete frames off the front of the input and handles them. */
void handle_input(struct conn *c)
{
	while (!c->dead && !c->closing && buf_len(&c->in) >= 4) {
		const uint8_t *h = buf_head(&c->in);
		uint32_t n = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
		if (n == 0 || n > WARREN_MAX_FRAME_BYTES) {
			/* The length is the only thing that finds the next frame: once it is wrong, nothing
			 * after it can be trusted. Say why, then hang up. */
			if (n == 0) send_err(c, 0, ERR_MALFORMED, "empty frame");
			else send_err(c, 0, ERR_TOO_LARGE, "frame of %u bytes exceeds the limit of %d", n, WARREN_MAX_FRAME_BYTES);
			c->closing = 1;
			buf_free(&c->in);
			return;
		}
		if (buf_len(&c->in) < 4 + (size_t)n) {
			if (buf_reserve(&c->in, 4 + (size_t)n - buf_len(&c->in)) < 0) c->dead = 1;
			return;
		}
		handle_frame(c, h + 4, n);
		buf_consume(&c->in, 4 + (size_t)n);
	}
	buf_trim(&c->in);
}

/* ---- connections ---- */

static void conn_add(int fd)
{
	if (nconns >= WARREN_MAX_CONNS) { close(fd); return; }
	struct conn *c = calloc(1, sizeof *c);
	if (!c) { close(fd); return; }
	c->fd = fd;
	conns[nconns++] = c;
}

static void conn_read(struct conn *c)
{
	/* Bounded per turn, so one busy client cannot starve the others or the commands. */
	for (int turn = 0; turn < 16 && !c->dead && !c->closing; turn++) {
		if (buf_reserve(&c->in, READ_CHUNK) < 0) { c->dead = 1; return; }
		ssize_t n = read(c->fd, c->in.data + c->in.end, c->in.cap - c->in.end);
		if (n > 0) { c->in.end += (size_t)n; handle_input(c); continue; }
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
		c->dead = 1;
	}
}

static void conn_flush(struct conn *c)
{
	while (!c->dead && buf_len(&c->out) > 0) {
		ssize_t n = write(c->fd, buf_head(&c->out), buf_len(&c->out));
		if (n > 0) { buf_consume(&c->out, (size_t)n); continue; }
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
		c->dead = 1;
	}
	buf_trim(&c->out);
	if (c->closing && buf_len(&c->out) == 0) c->dead = 1;
}

static void conns_sweep(void)
{
	for (int i = 0; i < nconns;) {
		struct conn *c = conns[i];
		if (!c->dead) { i++; continue; }
		exec_conn_gone(c);
		close(c->fd);
		buf_free(&c->in);
		buf_free(&c->out);
		free(c);
		conns[i] = conns[--nconns];
	}
}

static int open_stream(const char *path)
{
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0) conn_add(fd);
	return fd;
}

/* ---- the loop ---- */

enum { OWN_SIG = 1, OWN_LISTEN = 2 };

int agent_run(int listen_fd, const char *stream_path)
{
	signal(SIGPIPE, SIG_IGN);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sig_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sig_fd < 0) { perror("warren-init: signalfd"); return 1; }
	if (listen_fd >= 0) fcntl(listen_fd, F_SETFL, O_NONBLOCK);
	int64_t stream_retry_at = 0;

	static struct pollfd fds[MAX_POLL];
	static void *owners[MAX_POLL];
	static int kinds[MAX_POLL];
	for (;;) {
		for (int i = 0; i < nconns; i++) conn_flush(conns[i]);
		conns_sweep();
		exec_sweep();
		relay_sweep();
		if (stream_path && nconns == 0 && now_ms() >= stream_retry_at) {
			if (open_stream(stream_path) < 0) stream_retry_at = now_ms() + STREAM_RETRY_MS;
		}

		int n = 0;
		fds[n] = (struct pollfd){ sig_fd, POLLIN, 0 }; kinds[n] = OWN_SIG; owners[n++] = NULL;
		if (listen_fd >= 0 && nconns < WARREN_MAX_CONNS) {
			fds[n] = (struct pollfd){ listen_fd, POLLIN, 0 }; kinds[n] = OWN_LISTEN; owners[n++] = NULL;
		}
		int first_conn = n;
		for (int i = 0; i < nconns; i++) {
			struct conn *c = conns[i];
			short ev = 0;
			if (!c->closing && buf_len(&c->out) < IN_PAUSE_OUT_BYTES) ev |= POLLIN;
			if (buf_len(&c->out) > 0) ev |= POLLOUT;
			fds[n] = (struct pollfd){ c->fd, ev, 0 }; kinds[n] = 0; owners[n++] = c;
		}
		int first_exec = n;
		n = exec_poll_fds(fds, owners, MAX_POLL, n);
		for (int i = first_exec; i < n; i++) kinds[i] = 0;
		int first_relay = n;
		n = relay_poll_fds(fds, owners, MAX_POLL, n);
		for (int i = first_relay; i < n; i++) kinds[i] = 0;

		int timeout = exec_poll_timeout();
		int relay_timeout = relay_poll_timeout();
		if (relay_timeout >= 0 && (timeout < 0 || relay_timeout < timeout)) timeout = relay_timeout;
		if (stream_path && nconns == 0 && (timeout < 0 || timeout > STREAM_RETRY_MS)) timeout = STREAM_RETRY_MS;
		int ready = poll(fds, (nfds_t)n, timeout);
		if (ready < 0 && errno != EINTR) { perror("warren-init: poll"); return 1; }

		for (int i = first_relay; ready > 0 && i < n; i++)
			if (fds[i].revents) relay_handle(owners[i], fds[i].revents, fds[i].fd);
		for (int i = first_exec; ready > 0 && i < first_relay; i++)
			if (fds[i].revents) exec_handle(owners[i], fds[i].revents, fds[i].fd);
		for (int i = first_conn; ready > 0 && i < first_exec; i++) {
			struct conn *c = owners[i];
			short rev = fds[i].revents;
			if (c->dead || !rev) continue;
			if (rev & POLLIN) conn_read(c);
			else if (rev & (POLLHUP | POLLERR | POLLNVAL)) c->dead = 1;
			if (c->dead && stream_path) stream_retry_at = now_ms() + STREAM_RETRY_MS;
		}
		for (int i = 0; ready > 0 && i < first_conn; i++) {
			if (!fds[i].revents) continue;
			if (kinds[i] == OWN_LISTEN) {
				for (int k = 0; k < 16 && nconns < WARREN_MAX_CONNS; k++) {
					int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
					if (fd < 0) break;
					conn_add(fd);
				}
			}
		}
		/* Children last: their output was read above, so nothing is lost when they are reaped. */
		struct signalfd_siginfo si;
		while (read(sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {}
		exec_reap();
		exec_check_timeouts();
	}
}
