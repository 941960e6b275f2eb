/* Running commands: fork, set up the child, stream its output within the client's credit,
 * enforce timeout and output cap, reap it. Each exec is its own session and process group
 * (setsid), so a timeout or a kill reaches everything it started, while processes it leaves
 * behind after it exits live on as children of PID 1 (this agent), which reaps them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "agent.h"
#include "seccomp.h"
#include "tree.h"
#include "exec.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* Pipe reads per event: the size of one out frame's data. */
#define CHUNK (64 * 1024)
/* Stop reading a command's output while its connection has this much unsent. */
#define OUT_HIGH_WATER (4 * 1024 * 1024)
/* What is still read from a command's pipes after it exits (background writers may hold them). */
#define DRAIN_BUDGET (1024 * 1024)

struct exec *execs[WARREN_MAX_EXECS];
int nexecs;

/* Output pipes of ended commands that background processes still hold. They are read and the
 * bytes dropped until those processes close them, so a background server that logs to stdout
 * is not killed by SIGPIPE the first time it writes after its exec ended. */
static int lingering[WARREN_MAX_EXECS];
static int nlingering;
static char linger_owner; /* the poll owner standing for "a lingering pipe" */

static void close_fd(int *fd)
{
	if (*fd >= 0) close(*fd);
	*fd = -1;
}

static struct exec *find(const struct conn *c, uint64_t id)
{
	for (int i = 0; i < nexecs; i++)
		if (execs[i]->conn == c && execs[i]->id == id && !execs[i]->done) return execs[i];
	return NULL;
}

/* ---- the child side ---- */

struct child_fail { int32_t stage, err; };
enum { STAGE_CWD = 1, STAGE_GROUPS, STAGE_GID, STAGE_UID, STAGE_EXEC, STAGE_SECCOMP, STAGE_TTY, STAGE_CGROUP };

int exec_cgroup_fd = -1;

static void __attribute__((noreturn)) child_fail(int fd, int stage)
{
	struct child_fail f = { stage, errno };
	ssize_t w = write(fd, &f, sizeof f);
	(void)w;
	_exit(127);
}

/* Searches PATH the way a shell does, with the command's own PATH, not the agent's. */
static void exec_path(char **argv, char **envp, const char *path)
{
	if (strchr(argv[0], '/')) { execve(argv[0], argv, envp); return; }
	int saw_eacces = 0;
	size_t alen = strlen(argv[0]);
	const char *p = path;
	while (*p || p == path) {
		const char *colon = strchrnul(p, ':');
		size_t dlen = (size_t)(colon - p);
		char full[WARREN_MAX_PATH + 1];
		if (dlen + 1 + alen < sizeof full) {
			memcpy(full, dlen ? p : ".", dlen ? dlen : 1);
			size_t at = dlen ? dlen : 1;
			full[at] = '/';
			memcpy(full + at + 1, argv[0], alen + 1);
			execve(full, argv, envp);
			if (errno == EACCES) saw_eacces = 1;
			else if (errno != ENOENT && errno != ENOTDIR) return;
		}
		if (!*colon) break;
		p = colon + 1;
	}
	errno = saw_eacces ? EACCES : ENOENT;
}

/* The child of a `tree` request: the archive on its stdout (the status pipe closed by hand, as
 * execve would, says it started). It stays in the agent's cgroup, outside the commands' group
 * a snapshot freezes. */
static void __attribute__((noreturn)) tree_child(int out_w, int err_w, int status_w, int flatten)
{
	signal(SIGPIPE, SIG_DFL);
	setsid();
	dup2(out_w, 1);
	dup2(err_w, 2);
	close(status_w);
	/* Nothing of the agent's stays open in it (a VM's port has one opener at a time). */
	if (tree_upper_fd >= 0 && dup2(tree_upper_fd, 3) == 3) tree_upper_fd = 3;
	for (int fd = tree_upper_fd == 3 ? 4 : 3; fd < 4096; fd++) close(fd);
	_exit(tree_write(flatten));
}

static void __attribute__((noreturn)) child(int in_r, int out_w, int err_w, int status_w,
	char **argv, char **envp, const char *path, const char *cwd, uid_t uid, gid_t gid, int tty)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	/* On a pseudo-terminal the new session takes it as its controlling terminal, so the shell
	 * has job control and ^C reaches the foreground group. */
	if (tty && ioctl(in_r, TIOCSCTTY, 0) < 0) child_fail(status_w, STAGE_TTY);
	dup2(in_r, 0);
	dup2(tty ? in_r : out_w, 1);
	dup2(tty ? in_r : err_w, 2);
	/* The agent is shielded from the OOM killer; its commands must not be. Raising the score
	 * needs no privilege, and the floor stays where the launcher left it (see sandbox.c). */
	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom >= 0) { ssize_t w = write(oom, "0", 1); (void)w; close(oom); }
	/* In a VM the commands have a cgroup of their own (vm.c): its pids limit, and the freezer a
	 * snapshot uses, hold them and not the agent. */
	if (exec_cgroup_fd >= 0 && write(exec_cgroup_fd, "0", 1) < 0) child_fail(status_w, STAGE_CGROUP);
	if (uid != 0 || gid != 0) {
		if (setgroups(1, &gid) < 0) child_fail(status_w, STAGE_GROUPS);
		if (setgid(gid) < 0) child_fail(status_w, STAGE_GID);
		if (setuid(uid) < 0) child_fail(status_w, STAGE_UID);
	}
	/* As the user: a directory that user may not enter is refused, as a login would refuse it. */
	if (chdir(cwd) < 0) child_fail(status_w, STAGE_CWD);
	umask(022);
	/* Last before exec: the filter holds for the command and everything it starts. */
	if (seccomp_install_command_filter() < 0) child_fail(status_w, STAGE_SECCOMP);
	exec_path(argv, envp, path);
	child_fail(status_w, STAGE_EXEC);
}

/* ---- building argv and env from the request ---- */

static void free_strv(char **v)
{
	if (!v) return;
	for (char **p = v; *p; p++) free(*p);
	free(v);
}

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) { memcpy(d, s, n); d[n] = 0; }
	return d;
}

/* The request's argv, NULL-terminated. parse_req already checked the types. */
static char **build_argv(const struct req *q, const char **why)
{
	struct mp_in r = q->argv;
	uint32_t n;
	if (mp_array(&r, &n) < 0 || n == 0) { *why = "argv must be a non-empty array of strings"; return NULL; }
	char **v = calloc((size_t)n + 1, sizeof *v);
	if (!v) { *why = "out of memory"; return NULL; }
	for (uint32_t i = 0; i < n; i++) {
		const char *s;
		uint32_t len;
		if (mp_str(&r, &s, &len) < 0 || !(v[i] = dup_n(s, len))) { free_strv(v); *why = "bad argv"; return NULL; }
	}
	if (!v[0][0]) { free_strv(v); *why = "argv[0] is empty"; return NULL; }
	return v;
}

/* Defaults (PATH, HOME) with the request's variables laid over them. */
static char **build_env(const struct req *q, uid_t uid, const char **path_out, const char **why)
{
	uint32_t n = 0;
	struct mp_in r = q->env;
	if (q->has_env && mp_map(&r, &n) < 0) { *why = "env must be a map of strings"; return NULL; }
	char **v = calloc((size_t)n + 3, sizeof *v);
	if (!v) { *why = "out of memory"; return NULL; }
	int have_path = 0, have_home = 0, k = 0;
	for (uint32_t i = 0; i < n; i++) {
		const char *key, *val;
		uint32_t kl, vl;
		if (mp_str(&r, &key, &kl) < 0 || mp_str(&r, &val, &vl) < 0 || kl == 0 || memchr(key, '=', kl)) {
			free_strv(v);
			*why = "env keys must be non-empty strings without '='";
			return NULL;
		}
		char *kv = malloc((size_t)kl + vl + 2);
		if (!kv) { free_strv(v); *why = "out of memory"; return NULL; }
		memcpy(kv, key, kl);
		kv[kl] = '=';
		memcpy(kv + kl + 1, val, vl);
		kv[kl + 1 + vl] = 0;
		if (kl == 4 && !memcmp(key, "PATH", 4)) { have_path = 1; *path_out = kv + 5; }
		if (kl == 4 && !memcmp(key, "HOME", 4)) have_home = 1;
		v[k++] = kv;
	}
	if (!have_path) { v[k] = strdup("PATH=" DEFAULT_PATH); *path_out = v[k] ? v[k] + 5 : DEFAULT_PATH; k++; }
	if (!have_home) v[k++] = strdup(uid == 0 ? "HOME=/root" : "HOME=/");
	for (int i = 0; i < k; i++) if (!v[i]) { free_strv(v); *why = "out of memory"; return NULL; }
	return v;
}

/* ---- frames ---- */

static void send_started(struct exec *e)
{
	if (e->started_sent || !e->conn) return;
	e->started_sent = 1;
	size_t m = frame_begin(e->conn);
	struct buf *b = &e->conn->out;
	mp_w_map(b, 3);
	mp_w_cstr(b, "t"); mp_w_cstr(b, "started");
	mp_w_cstr(b, "id"); mp_w_u64(b, e->id);
	mp_w_cstr(b, "pid"); mp_w_u64(b, (uint64_t)e->pid);
	frame_end(e->conn, m);
}

static const char *stage_name(int stage)
{
	switch (stage) {
	case STAGE_CWD: return "chdir to cwd";
	case STAGE_GROUPS: return "setgroups";
	case STAGE_GID: return "setgid";
	case STAGE_UID: return "setuid";
	case STAGE_SECCOMP: return "install the seccomp filter";
	case STAGE_TTY: return "take the terminal";
	case STAGE_CGROUP: return "join the commands' cgroup";
	default: return "exec";
	}
}

/* Learns, without blocking, whether the child reached execve. Called from poll and before any
 * output or exit is reported, so `started` (or the err) always comes first. */
static void settle_start(struct exec *e)
{
	if (e->start != START_PENDING || e->status_fd < 0) return;
	struct child_fail f;
	ssize_t n = read(e->status_fd, &f, sizeof f);
	if (n < 0 && errno == EAGAIN) return;
	close_fd(&e->status_fd);
	if (n == (ssize_t)sizeof f) {
		e->start = START_FAILED;
		e->fail_stage = f.stage;
		e->fail_errno = f.err;
		if (e->conn) {
			/* A failure the request's cwd or uid/gid caused names that field, so the client can
			 * say which of its options was wrong. */
			const char *code = errno_code(f.err);
			const char *field = f.stage == STAGE_CWD ? "cwd"
				: f.stage == STAGE_GROUPS || f.stage == STAGE_GID || f.stage == STAGE_UID ? "user" : NULL;
			send_err_field(e->conn, e->id, code, field, "%s: %s failed: %s", e->name, stage_name(f.stage), strerror(f.err));
		}
		return;
	}
	/* EOF: the status pipe closed on execve (close-on-exec). */
	e->start = START_OK;
	send_started(e);
}

static void emit(struct exec *e, int stream, const uint8_t *data, size_t n)
{
	settle_start(e);
	if (!e->conn && !e->retain) return;
	uint64_t room = e->max_out > e->emitted ? e->max_out - e->emitted : 0;
	if (n > room) { e->truncated = 1; n = (size_t)room; }
	if (n == 0) return;
	if (e->credited) e->credit = e->credit > n ? e->credit - n : 0;
	if (e->retain) {
		/* Kept until the host acknowledges it, so a host that dies holding it unread gets it again. */
		struct rframe *f = retain_out(e, stream, data, n);
		if (f && e->conn) buf_put(&e->conn->out, f->bytes, f->len);
		e->emitted += n;
		return;
	}
	size_t m = frame_begin(e->conn);
	struct buf *b = &e->conn->out;
	mp_w_map(b, 5);
	mp_w_cstr(b, "t"); mp_w_cstr(b, "out");
	mp_w_cstr(b, "id"); mp_w_u64(b, e->id);
	mp_w_cstr(b, "seq"); mp_w_u64(b, e->seq++);
	mp_w_cstr(b, "fd"); mp_w_u64(b, (uint64_t)stream);
	mp_w_cstr(b, "data"); mp_w_bin(b, data, n);
	frame_end(e->conn, m);
	e->emitted += n;
}

void exec_send_exit(struct exec *e)
{
	if (!e->conn) return;
	size_t m = frame_begin(e->conn);
	struct buf *b = &e->conn->out;
	mp_w_map(b, 8);
	mp_w_cstr(b, "t"); mp_w_cstr(b, "exit");
	mp_w_cstr(b, "id"); mp_w_u64(b, e->id);
	mp_w_cstr(b, "seq"); mp_w_u64(b, e->seq);
	if (WIFSIGNALED(e->wait_status)) { mp_w_cstr(b, "signal"); mp_w_u64(b, (uint64_t)WTERMSIG(e->wait_status)); }
	else { mp_w_cstr(b, "code"); mp_w_u64(b, (uint64_t)WEXITSTATUS(e->wait_status)); }
	mp_w_cstr(b, "timedOut"); mp_w_bool(b, e->timed_out);
	mp_w_cstr(b, "truncated"); mp_w_bool(b, e->truncated);
	mp_w_cstr(b, "killed"); mp_w_bool(b, e->killed);
	int64_t d = now_ms() - e->start_ms;
	mp_w_cstr(b, "durationMs"); mp_w_u64(b, d > 0 ? (uint64_t)d : 0);
	frame_end(e->conn, m);
}

/* ---- reading and writing the pipes ---- */

/* True when output may be read now: there is credit, or what is read is dropped anyway (past
 * the cap, or nobody is left to send it to). */
static int may_read(const struct exec *e)
{
	if (e->emitted >= e->max_out) return 1;
	/* A resumable exec keeps what it read for a host that may be gone: its credit still holds,
	 * and what it may keep unacknowledged is bounded too. */
	if (e->retain) return !retain_full(e) && (!e->credited || e->credit > 0);
	return !e->conn || !e->credited || e->credit > 0;
}

/* Reads one chunk (no more than the credit); returns bytes read, 0 at EOF (fd closed), -1 when
 * nothing is there now. */
static ssize_t pump_out(struct exec *e, int *fd, int stream)
{
	uint8_t chunk[CHUNK];
	size_t want = sizeof chunk;
	if ((e->conn || e->retain) && e->credited && e->emitted < e->max_out && e->credit < want) want = (size_t)e->credit;
	if (want == 0) return -1;
	ssize_t n = read(*fd, chunk, want);
	if (n > 0) { emit(e, stream, chunk, (size_t)n); return n; }
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) return -1;
	close_fd(fd);
	return 0;
}

/* Tells the client how much streamed stdin the pipe took, and whether stdin is gone: its window. */
static void send_taken(struct exec *e, uint64_t bytes, int closed)
{
	if (!e->conn || !e->in_stream || (bytes == 0 && !closed)) return;
	size_t m = frame_begin(e->conn);
	struct buf *b = &e->conn->out;
	mp_w_map(b, closed ? 4 : 3);
	mp_w_cstr(b, "t"); mp_w_cstr(b, "taken");
	mp_w_cstr(b, "id"); mp_w_u64(b, e->id);
	mp_w_cstr(b, "bytes"); mp_w_u64(b, bytes);
	if (closed) { mp_w_cstr(b, "closed"); mp_w_bool(b, 1); }
	frame_end(e->conn, m);
}

/* Stdin that can never be read: what is held goes, and the client hears it is gone (with the
 * `taken` bytes the pipe took before). */
static void drop_in(struct exec *e, uint64_t taken)
{
	buf_free(&e->in_buf);
	close_fd(&e->in_fd);
	send_taken(e, taken, 1);
}

static void pump_in(struct exec *e)
{
	uint64_t taken = 0;
	while (e->in_fd >= 0 && buf_len(&e->in_buf) > 0) {
		ssize_t n = write(e->in_fd, buf_head(&e->in_buf), buf_len(&e->in_buf));
		if (n > 0) { buf_consume(&e->in_buf, (size_t)n); taken += (uint64_t)n; continue; }
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
		/* The command closed its stdin (EPIPE). */
		drop_in(e, taken);
		return;
	}
	send_taken(e, taken, 0);
	buf_trim(&e->in_buf);
	if (e->in_fd >= 0 && buf_len(&e->in_buf) == 0 && (!e->in_stream || e->in_eof)) close_fd(&e->in_fd);
}

static void kill_group(struct exec *e, int sig)
{
	/* The group may not exist yet if the child has not reached setsid(): signal it directly. */
	if (kill(-e->pid, sig) < 0) kill(e->pid, sig);
}

static void linger(int *fd)
{
	if (*fd < 0) return;
	if (nlingering < WARREN_MAX_EXECS) { lingering[nlingering++] = *fd; *fd = -1; }
	else close_fd(fd); /* too many: those writers will get EPIPE */
}

static void linger_read(int fd)
{
	uint8_t scratch[CHUNK];
	ssize_t n = read(fd, scratch, sizeof scratch);
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) return;
	for (int i = 0; i < nlingering; i++) {
		if (lingering[i] != fd) continue;
		close(fd);
		lingering[i] = lingering[--nlingering];
		return;
	}
}

/* Reads what the command left in its pipes (up to DRAIN_BUDGET each). Returns 1 when that is
 * done, 0 when it stopped for want of credit (exec_credit calls finish again). */
static int drain(struct exec *e)
{
	int *fds[2] = { &e->out_fd, &e->err_fd };
	for (int s = 0; s < 2; s++) {
		while (*fds[s] >= 0 && e->drained[s] < DRAIN_BUDGET) {
			if (!may_read(e)) {
				/* Out of credit: wait for more only if the pipe still holds bytes. */
				int queued = 0;
				if (ioctl(*fds[s], FIONREAD, &queued) < 0 || queued <= 0) break;
				return 0;
			}
			ssize_t n = pump_out(e, fds[s], s + 1);
			if (n <= 0) break;
			e->drained[s] += (size_t)n;
		}
	}
	return 1;
}

/* The command's main process ended: report what is left and how it ended. Called again while
 * it waits for credit to send the rest of its output. */
void exec_finish(struct exec *e)
{
	if (e->done || e->ended) return;
	settle_start(e);
	if (e->start == START_PENDING) {
		/* Cannot happen (the pipe is at EOF or holds the failure once the child is gone);
		 * treated as started so the client still gets an exit. */
		close_fd(&e->status_fd);
		e->start = START_OK;
		send_started(e);
	}
	if (e->start == START_OK) {
		send_started(e);
		if (!drain(e)) return;
		exec_send_exit(e);
	}
	linger(&e->out_fd);
	linger(&e->err_fd);
	close_fd(&e->in_fd);
	/* A resumable command's end is kept (with its unacknowledged output) until the host says it
	 * has it: one that died before it did learns it from the next host (see retain.c). */
	if (e->retain && e->start == START_OK) { e->ended = 1; e->ended_ms = now_ms(); }
	else e->done = 1;
}

/* ---- requests ---- */

/* The size a request asks for; 0 and -1 when it is out of range. */
static int terminal_size(const struct req *q, struct winsize *ws)
{
	uint64_t cols = q->has_cols ? q->cols : 80, rows = q->has_rows ? q->rows : 24;
	if (cols < 1 || cols > 0xffff || rows < 1 || rows > 0xffff) return -1;
	*ws = (struct winsize){ .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	return 0;
}

/* A pseudo-terminal for an exec, laid out as its pipes would be: the child gets the terminal
 * (in_p[0], out_p[1], err_p[1] are one descriptor of it, closed once), the agent reads the
 * master as out_p[0] and writes it through in_p[1]; there is no separate stderr. */
static int open_terminal(const struct req *q, int in_p[2], int out_p[2], int err_p[2])
{
	struct winsize ws;
	if (terminal_size(q, &ws) < 0) { errno = EINVAL; return -1; }
	int master, slave;
	if (openpty(&master, &slave, NULL, NULL, &ws) < 0) return -1;
	int writer = fcntl(master, F_DUPFD_CLOEXEC, 3);
	if (writer < 0) { int err = errno; close(master); close(slave); errno = err; return -1; }
	fcntl(master, F_SETFD, FD_CLOEXEC);
	fcntl(slave, F_SETFD, FD_CLOEXEC);
	in_p[0] = slave; in_p[1] = writer;
	out_p[0] = master; out_p[1] = -1;
	err_p[0] = -1; err_p[1] = -1;
	return 0;
}

/* Starts an exec, or (tree 1: the writable layer, 2: flattened) the archive of the tree. */
static void start(struct conn *c, const struct req *q, int tree)
{
	if (!tree && !q->has_argv) { send_err(c, q->id, ERR_INVALID, "exec needs argv"); return; }
	if (tree && tree_upper_fd < 0) { send_err(c, q->id, ERR_UNSUPPORTED, "tree is answered inside a VM only"); return; }
	if (find(c, q->id) || retain_find(q->id)) { send_err(c, q->id, ERR_INVALID, "exec id %llu is in use", (unsigned long long)q->id); return; }
	if (q->tag.set && (!q->retain || q->tag.n > WARREN_MAX_TAG || memchr(q->tag.p, 0, q->tag.n))) {
		send_err_field(c, q->id, ERR_INVALID, "tag", "tag needs retain and at most %d bytes without NUL", WARREN_MAX_TAG);
		return;
	}
	if (nexecs >= WARREN_MAX_EXECS) { send_err(c, q->id, ERR_OVERLOADED, "too many commands running (%d)", WARREN_MAX_EXECS); return; }
	uid_t uid = q->has_uid ? (uid_t)q->uid : 0;
	gid_t gid = q->has_gid ? (gid_t)q->gid : (gid_t)uid;
	if ((q->has_uid && q->uid > 0xfffffffeu) || (q->has_gid && q->gid > 0xfffffffeu)) {
		send_err(c, q->id, ERR_INVALID, "uid and gid must be below 2^32-1");
		return;
	}
	char cwd[WARREN_MAX_PATH + 1] = "/";
	if (q->cwd.set) {
		if (q->cwd.n == 0 || q->cwd.n > WARREN_MAX_PATH || memchr(q->cwd.p, 0, q->cwd.n)) {
			send_err(c, q->id, ERR_INVALID, "cwd must be a non-empty path without NUL");
			return;
		}
		memcpy(cwd, q->cwd.p, q->cwd.n);
		cwd[q->cwd.n] = 0;
	}
	const char *why = NULL, *path = DEFAULT_PATH;
	static char tree_name[] = "tree";
	char **argv = tree ? calloc(2, sizeof *argv) : build_argv(q, &why);
	if (tree && argv && !(argv[0] = strdup(tree_name))) { free(argv); argv = NULL; }
	char **envp = argv ? build_env(q, uid, &path, &why) : NULL;
	struct exec *e = argv && envp ? calloc(1, sizeof *e) : NULL;
	if (!e) {
		send_err(c, q->id, why && strcmp(why, "out of memory") ? ERR_INVALID : ERR_INTERNAL, "%s", why ? why : "out of memory");
		free_strv(argv);
		free_strv(envp);
		return;
	}
	int in_p[2] = { -1, -1 }, out_p[2] = { -1, -1 }, err_p[2] = { -1, -1 }, st_p[2] = { -1, -1 };
	if (!tree && q->pty && open_terminal(q, in_p, out_p, err_p) < 0) {
		int err = errno;
		send_err_field(c, q->id, errno_code(err), "pty", "openpty: %s", strerror(err));
		free(e);
		free_strv(argv);
		free_strv(envp);
		return;
	}
	if (((tree || !q->pty) && (pipe2(in_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0)) || pipe2(st_p, O_CLOEXEC) < 0) {
		int err = errno;
		for (int i = 0; i < 2; i++) { close_fd(&in_p[i]); close_fd(&out_p[i]); close_fd(&err_p[i]); close_fd(&st_p[i]); }
		send_err(c, q->id, errno_code(err), "pipe: %s", strerror(err));
		free(e);
		free_strv(argv);
		free_strv(envp);
		return;
	}
	snprintf(e->name, sizeof e->name, "%s", argv[0]);
	e->start_ms = now_ms();
	pid_t pid = fork();
	if (pid == 0 && tree) tree_child(out_p[1], err_p[1], st_p[1], tree == 2);
	if (pid == 0) child(in_p[0], out_p[1], err_p[1], st_p[1], argv, envp, path, cwd, uid, gid, q->pty);
	int fork_err = errno;
	free_strv(argv);
	free_strv(envp);
	close_fd(&in_p[0]);
	close_fd(&out_p[1]);
	close_fd(&err_p[1]);
	close_fd(&st_p[1]);
	if (pid < 0) {
		close_fd(&in_p[1]); close_fd(&out_p[0]); close_fd(&err_p[0]); close_fd(&st_p[0]);
		free(e);
		send_err(c, q->id, fork_err == EAGAIN ? ERR_NO_CAPACITY : ERR_INTERNAL, "fork: %s", strerror(fork_err));
		return;
	}
	e->conn = c;
	e->id = q->id;
	e->pid = pid;
	e->in_fd = in_p[1];
	e->out_fd = out_p[0];
	e->err_fd = err_p[0];
	e->status_fd = st_p[0];
	e->pty = !tree && q->pty;
	int ours[4] = { e->in_fd, e->out_fd, e->err_fd, e->status_fd };
	for (int i = 0; i < 4; i++) if (ours[i] >= 0) fcntl(ours[i], F_SETFL, O_NONBLOCK);
	e->in_stream = q->stdin_stream;
	e->max_out = q->has_max_output ? q->max_output : WARREN_DEFAULT_MAX_OUTPUT_BYTES;
	e->credited = q->has_window;
	e->credit = q->has_window ? q->window : 0;
	e->deadline_ms = q->has_timeout && q->timeout_ms > 0 ? e->start_ms + (int64_t)q->timeout_ms : 0;
	e->start = START_PENDING;
	e->retain = !tree && q->retain;
	if (q->tag.set) { memcpy(e->tag, q->tag.p, q->tag.n); e->tag[q->tag.n] = 0; }
	if (q->in.set && !tree) buf_put(&e->in_buf, q->in.p, q->in.n);
	execs[nexecs++] = e;
	pump_in(e);
}

void exec_start(struct conn *c, const struct req *q)
{
	start(c, q, 0);
}

void exec_tree(struct conn *c, const struct req *q)
{
	start(c, q, q->flatten ? 2 : 1);
}

void exec_stdin(struct conn *c, const struct req *q)
{
	struct exec *e = find(c, q->id);
	/* No reply: stdin for a command that has ended, or never took streamed stdin, goes nowhere. */
	if (!e || !e->in_stream || e->in_eof || e->in_fd < 0) return;
	/* Past the window (a client that does not keep it), or out of memory: held no longer. */
	if (q->data.set && buf_len(&e->in_buf) + q->data.n > WARREN_STDIN_MAX_BYTES) { drop_in(e, 0); return; }
	if (q->data.set) buf_put(&e->in_buf, q->data.p, q->data.n);
	if (e->in_buf.oom) { drop_in(e, 0); return; }
	/* A terminal has no end of input of its own: its EOF character (^D) stands for it. */
	if (q->eof && e->pty) buf_put(&e->in_buf, "\x04", 1);
	if (q->eof) e->in_eof = 1;
	pump_in(e);
}

void exec_resize(struct conn *c, const struct req *q)
{
	if (!q->has_exec) { send_err(c, q->id, ERR_INVALID, "resize needs exec"); return; }
	struct exec *e = find(c, q->exec);
	if (!e || e->reaped) { send_err(c, q->id, ERR_NOT_FOUND, "no running exec %llu", (unsigned long long)q->exec); return; }
	if (!e->pty) { send_err_field(c, q->id, ERR_INVALID, "pty", "exec %llu has no terminal", (unsigned long long)q->exec); return; }
	struct winsize ws;
	if (!q->has_cols || !q->has_rows || terminal_size(q, &ws) < 0) { send_err(c, q->id, ERR_INVALID, "resize needs cols and rows from 1 to 65535"); return; }
	int fd = e->in_fd >= 0 ? e->in_fd : e->out_fd;
	/* The kernel sends SIGWINCH to the terminal's foreground group. */
	if (fd < 0 || ioctl(fd, TIOCSWINSZ, &ws) < 0) { send_err(c, q->id, ERR_NOT_FOUND, "exec %llu has let go of its terminal", (unsigned long long)q->exec); return; }
	send_ok(c, q->id);
}

void exec_kill(struct conn *c, const struct req *q)
{
	if (!q->has_exec) { send_err(c, q->id, ERR_INVALID, "kill needs exec"); return; }
	int sig = q->has_signal ? (int)q->signal : SIGKILL;
	if (q->has_signal && (q->signal < 1 || q->signal > 64)) { send_err(c, q->id, ERR_INVALID, "bad signal %lld", (long long)q->signal); return; }
	struct exec *e = find(c, q->exec);
	if (!e || e->reaped) { send_err(c, q->id, ERR_NOT_FOUND, "no running exec %llu", (unsigned long long)q->exec); return; }
	kill_group(e, sig);
	e->killed = 1;
	send_ok(c, q->id);
}

void exec_credit(struct conn *c, const struct req *q)
{
	struct exec *e = find(c, q->id);
	/* No reply: credit for an exec that has ended, or never asked for it, changes nothing. */
	if (!e || !e->credited || !q->has_bytes) return;
	e->credit = q->bytes > UINT64_MAX - e->credit ? UINT64_MAX : e->credit + q->bytes;
	if (e->reaped) exec_finish(e); /* it was waiting to send the rest of its output */
}

void exec_conn_gone(struct conn *c)
{
	for (int i = 0; i < nexecs; i++) {
		struct exec *e = execs[i];
		if (e->conn != c) continue;
		e->conn = NULL;
		/* A resumable command runs on for the next host to attach (retain.c). */
		if (e->retain) continue;
		if (!e->reaped) kill_group(e, SIGKILL);
		else if (!e->done) exec_finish(e); /* it waited for credit that will not come: drop the rest */
	}
}

/* ---- the event loop's side ---- */

static int backpressured(const struct exec *e)
{
	return e->conn && buf_len(&e->conn->out) > OUT_HIGH_WATER;
}

int exec_poll_fds(struct pollfd *fds, void **owners, int max, int n)
{
	for (int i = 0; i < nlingering && n < max; i++) {
		fds[n] = (struct pollfd){ lingering[i], POLLIN, 0 };
		owners[n++] = &linger_owner;
	}
	for (int i = 0; i < nexecs && n + 4 <= max; i++) {
		struct exec *e = execs[i];
		if (e->done) continue;
		/* Pipes of an ended command are read by finish, as credit comes. */
		int rd = !backpressured(e) && may_read(e) && !e->reaped;
		if (e->out_fd >= 0 && rd) { fds[n] = (struct pollfd){ e->out_fd, POLLIN, 0 }; owners[n++] = e; }
		if (e->err_fd >= 0 && rd) { fds[n] = (struct pollfd){ e->err_fd, POLLIN, 0 }; owners[n++] = e; }
		if (e->in_fd >= 0 && buf_len(&e->in_buf) > 0) { fds[n] = (struct pollfd){ e->in_fd, POLLOUT, 0 }; owners[n++] = e; }
		if (e->status_fd >= 0) { fds[n] = (struct pollfd){ e->status_fd, POLLIN, 0 }; owners[n++] = e; }
	}
	return n;
}

void exec_handle(void *owner, short revents, int fd)
{
	if (owner == &linger_owner) { linger_read(fd); return; }
	struct exec *e = owner;
	if (e->done || !revents) return;
	if (fd == e->out_fd) pump_out(e, &e->out_fd, 1);
	else if (fd == e->err_fd) pump_out(e, &e->err_fd, 2);
	else if (fd == e->in_fd) pump_in(e);
	else if (fd == e->status_fd) settle_start(e);
}

void exec_reap(void)
{
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid <= 0) return;
		for (int i = 0; i < nexecs; i++) {
			struct exec *e = execs[i];
			if (e->pid != pid || e->reaped) continue;
			e->reaped = 1;
			e->wait_status = st;
			exec_finish(e);
			break;
		}
		/* Anything else was an orphan re-parented to us (a background process): reaped, done. */
	}
}

int exec_poll_timeout(void)
{
	int64_t best = -1, now = now_ms();
	for (int i = 0; i < nexecs; i++) {
		const struct exec *e = execs[i];
		if (e->reaped || !e->deadline_ms) continue;
		int64_t left = e->deadline_ms - now;
		if (left < 0) left = 0;
		if (best < 0 || left < best) best = left;
	}
	return best > 60000 ? 60000 : (int)best;
}

void exec_check_timeouts(void)
{
	int64_t now = now_ms();
	for (int i = 0; i < nexecs; i++) {
		struct exec *e = execs[i];
		if (e->reaped || !e->deadline_ms || now < e->deadline_ms) continue;
		e->deadline_ms = 0;
		e->timed_out = 1;
		kill_group(e, SIGKILL);
	}
}

void exec_sweep(void)
{
	int64_t now = now_ms();
	for (int i = 0; i < nexecs;) {
		struct exec *e = execs[i];
		if (e->ended && retain_expired(e, now)) e->done = 1;
		if (!e->done) { i++; continue; }
		retain_drop(e, UINT64_MAX);
		close_fd(&e->out_fd);
		close_fd(&e->err_fd);
		close_fd(&e->in_fd);
		close_fd(&e->status_fd);
		buf_free(&e->in_buf);
		free(e);
		execs[i] = execs[--nexecs];
	}
}
