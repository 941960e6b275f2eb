/* The launcher, run on the host by the node: joins the sandbox's cgroups, binds the agent's
 * socket, clones the sandbox's PID 1 into new namespaces, prints its host PID, and exits when
 * the sandbox reports ready (0) or failed (1, with the reason on stderr). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sandbox.h"

#define CHILD_STACK (256 * 1024)

static const char *usage =
	"usage: warren-init launch --id ID --upper DIR --socket PATH [--egress DIR] --layer IMAGE [--layer IMAGE]...\n"
	"                          [--hostname NAME] [--disk-mib N] [--cgroup DIR|PROCS_FILE]...\n";

static int fail(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "warren-init: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return 1;
}

static int valid_id(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 63) return 0;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.')) return 0;
	return 1;
}

static int parse(int argc, char **argv, struct launch_opts *o)
{
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) return fail("%s needs a value%s", a, "");
		i++;
		if (!strcmp(a, "--id")) o->id = v;
		else if (!strcmp(a, "--hostname")) o->hostname = v;
		else if (!strcmp(a, "--upper")) o->upper = v;
		else if (!strcmp(a, "--socket")) o->socket = v;
		else if (!strcmp(a, "--egress")) o->egress = v;
		else if (!strcmp(a, "--disk-mib")) {
			char *end;
			errno = 0;
			o->disk_mib = strtoul(v, &end, 10);
			if (errno || *end || o->disk_mib > 16UL * 1024 * 1024) return fail("bad --disk-mib %s%s", v, "");
		} else if (!strcmp(a, "--layer")) {
			if (o->nlayers >= WARREN_MAX_LAYERS) return fail("too many layers%s%s", "", "");
			o->layers[o->nlayers++] = v;
		} else if (!strcmp(a, "--cgroup")) {
			if (o->ncgroups >= WARREN_MAX_CGROUPS) return fail("too many cgroups%s%s", "", "");
			o->cgroups[o->ncgroups++] = v;
		} else return fail("unknown option %s%s", a, "");
	}
	if (!o->id || !o->upper || !o->socket || o->nlayers == 0) { fputs(usage, stderr); return 1; }
	if (!valid_id(o->id)) return fail("bad --id %s: 1-63 of [A-Za-z0-9._-]%s", o->id, "");
	if (o->hostname && !valid_id(o->hostname)) return fail("bad --hostname %s: 1-63 of [A-Za-z0-9._-]%s", o->hostname, "");
	return 0;
}

/* Joining before the clone puts the child in the cgroups from its first instruction, and makes
 * them the root of its cgroup namespace. v1 hierarchies are separate trees: one file each. */
static int join_cgroups(const struct launch_opts *o)
{
	char line[32];
	int n = snprintf(line, sizeof line, "%d\n", (int)getpid());
	for (int i = 0; i < o->ncgroups; i++) {
		char path[4096];
		struct stat st;
		const char *g = o->cgroups[i];
		if (stat(g, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/cgroup.procs", g);
		else snprintf(path, sizeof path, "%s", g);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, line, (size_t)n) != n) {
			int err = errno;
			if (fd >= 0) close(fd);
			return fail("join cgroup %s: %s", path, strerror(err));
		}
		close(fd);
	}
	return 0;
}

static int bind_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path) { fail("socket path too long: %s%s", path, ""); return -1; }
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) { fail("socket: %s%s", strerror(errno), ""); return -1; }
	unlink(path); /* a stale socket of an earlier sandbox with this id */
	/* Only root (the node) may connect: the socket is the sandbox's control channel. */
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (r < 0 || listen(fd, 64) < 0) { fail("bind %s: %s", path, strerror(errno)); close(fd); return -1; }
	return fd;
}

struct child_args {
	const struct launch_opts *o;
	int listen_fd, report_fd, ready_r;
};

static int child_entry(void *p)
{
	struct child_args *a = p;
	close(a->ready_r);
	sandbox_main(a->o, a->listen_fd, a->report_fd);
}

int launch_main(int argc, char **argv)
{
	struct launch_opts o;
	memset(&o, 0, sizeof o);
	if (parse(argc, argv, &o)) return 1;
	if (argc > 0) {
		/* argv strings are contiguous from argv[-2] ("warren-init launch") to the last one. */
		o.arg_area = argv[-2];
		o.arg_area_len = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) + 1 - argv[-2]);
	}
	for (int i = 0; i < o.nlayers; i++)
		if (access(o.layers[i], R_OK) < 0) return fail("layer %s: %s", o.layers[i], strerror(errno));
	if (join_cgroups(&o)) return 1;
	int lfd = bind_socket(o.socket);
	if (lfd < 0) return 1;
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0) return fail("pipe: %s%s", strerror(errno), "");
	/* The child keeps running on this stack as the agent: only the pages it touches cost memory. */
	void *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) return fail("mmap: %s%s", strerror(errno), "");
	struct child_args args = { &o, lfd, pipefd[1], pipefd[0] };
	fflush(NULL);
	pid_t pid = clone(child_entry, (char *)stack + CHILD_STACK,
		CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD, &args);
	if (pid < 0) {
		int err = errno;
		unlink(o.socket);
		return fail("clone: %s%s", strerror(err), "");
	}
	close(pipefd[1]);
	close(lfd);
	printf("%d\n", (int)pid);
	fflush(stdout);
	/* The child writes "ok\n" when ready or one line of reason when not, then closes. */
	char msg[1024];
	size_t got = 0;
	for (;;) {
		ssize_t n = read(pipefd[0], msg + got, sizeof msg - 1 - got);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) break;
		got += (size_t)n;
		if (got == sizeof msg - 1) break;
	}
	msg[got] = 0;
	if (got >= 3 && !memcmp(msg, "ok\n", 3)) return 0;
	kill(pid, SIGKILL);
	int st = 0;
	waitpid(pid, &st, 0);
	unlink(o.socket);
	if (got == 0) {
		char how[64];
		if (WIFSIGNALED(st)) snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(st));
		else snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
		return fail("sandbox set-up failed: the sandbox process %s before reporting", how, "");
	}
	msg[strcspn(msg, "\n")] = 0;
	return fail("sandbox set-up failed: %s%s", msg, "");
}
