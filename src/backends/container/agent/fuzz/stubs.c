/* The fuzz target's stand-ins for everything on the request path that would act on the host.
 * Linked into fuzz_request only, never into the agent.
 *
 *   - file_read/write/list/stat/remove/mkdir/rename/symlink: check the request (fields inside the received bytes,
 *     the path through take_path exactly as files.c takes it) and answer ok;
 *   - fork (and every other way to start a process, wrapped with -Wl,--wrap): fails with EAGAIN,
 *     so exec.c builds argv and env, then answers NO_CAPACITY and frees them;
 *   - sethostname: checks the name and does nothing;
 *   - openpty: a pipe stands in for the terminal, so a pty exec goes on to fork (which fails);
 *   - the egress relay and the seccomp filter: never reached from a request (abort if they are).
 * A call that must never happen aborts, which libFuzzer reports with the input. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include "../agent.h"
#include "../seccomp.h"
#include "stubs.h"

static const uint8_t *recv_base;
static size_t recv_len;

void stub_received(const uint8_t *base, size_t len)
{
	recv_base = base;
	recv_len = len;
}

static void __attribute__((noreturn)) never(const char *what)
{
	fprintf(stderr, "fuzz stubs: %s was called on the request path\n", what);
	abort();
}

/* A field points into the received bytes (ASan checks the block, not the part of it in use). */
static void in_received(const void *p, size_t n)
{
	const uint8_t *b = p;
	if (b < recv_base || b > recv_base + recv_len || (size_t)(recv_base + recv_len - b) < n) never("a field outside the received bytes");
}

static void check_req(const struct req *q)
{
	const struct field *fields[] = { &q->t, &q->cwd, &q->path, &q->data, &q->in, &q->name, &q->to, &q->target };
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (fields[i]->set) in_received(fields[i]->p, fields[i]->n);
	if (q->has_argv) in_received(q->argv.p, (size_t)(q->argv.end - q->argv.p));
	if (q->has_env) in_received(q->env.p, (size_t)(q->env.end - q->env.p));
}

/* What every file operation does before touching the file system. */
static void file_op(struct conn *c, const struct req *q)
{
	check_req(q);
	char path[WARREN_MAX_PATH + 1];
	if (take_path(c, q, path) < 0) return;
	if (strlen(path) != q->path.n) never("take_path with a path of the wrong length");
	send_ok(c, q->id);
}

void file_read(struct conn *c, const struct req *q) { file_op(c, q); }
void file_write(struct conn *c, const struct req *q) { file_op(c, q); }
void file_list(struct conn *c, const struct req *q) { file_op(c, q); }
void file_stat(struct conn *c, const struct req *q) { file_op(c, q); }
void file_remove(struct conn *c, const struct req *q) { file_op(c, q); }
void file_mkdir(struct conn *c, const struct req *q) { file_op(c, q); }
void file_rename(struct conn *c, const struct req *q) { file_op(c, q); }
void file_symlink(struct conn *c, const struct req *q) { file_op(c, q); }

int relay_poll_fds(struct pollfd *fds, void **owners, int max, int base) { (void)fds; (void)owners; (void)max; return base; }
void relay_handle(void *owner, short revents, int fd) { (void)owner; (void)revents; (void)fd; never("relay_handle"); }
void relay_sweep(void) {}
int relay_poll_timeout(void) { return -1; }
int seccomp_install_command_filter(void) { never("seccomp_install_command_filter"); }

/* Wrapped with -Wl,--wrap=NAME: the agent's objects call __wrap_NAME instead of libc's. */
pid_t __wrap_fork(void) { errno = EAGAIN; return -1; }
pid_t __wrap_vfork(void) { errno = EAGAIN; return -1; }
int __wrap_clone(void) { never("clone"); }
int __wrap_posix_spawn(void) { never("posix_spawn"); }
int __wrap_posix_spawnp(void) { never("posix_spawnp"); }
int __wrap_execve(void) { never("execve"); }
int __wrap_execvp(void) { never("execvp"); }
int __wrap_execvpe(void) { never("execvpe"); }
int __wrap_kill(pid_t pid, int sig) { (void)pid; (void)sig; never("kill (no process was started)"); }
int __wrap_openpty(int *master, int *slave, char *name, const void *termp, const void *winp)
{
	(void)name; (void)termp; (void)winp;
	int p[2];
	if (pipe(p) < 0) return -1;
	*master = p[0];
	*slave = p[1];
	return 0;
}
int __wrap_sethostname(const char *name, size_t len)
{
	in_received(name, len);
	return 0;
}

/* The rename may also go through sandbox.c (which raises a capability around it there): that
 * file is not linked here, so this stands in for it, a prototype of its own kept beside. */
int sandbox_rename(const char *name, size_t len);
int sandbox_rename(const char *name, size_t len) { return __wrap_sethostname(name, len); }
