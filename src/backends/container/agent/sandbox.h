/* The launcher (host side) and the sandbox set-up (the cloned child, before it becomes the agent). */
#ifndef WARREN_SANDBOX_H
#define WARREN_SANDBOX_H
#include <stddef.h>

#define WARREN_MAX_LAYERS 32
#define WARREN_MAX_CGROUPS 16

/* The agent's directory descriptor of the writable layer's host side (the tmpfs holding `u`, the
 * overlay's upper, and `w`, its work dir; with disk_mib 0 the host directory itself), opened
 * before pivot_root. The old root is detached after it, so no path reaches the upper any more:
 * the node (root on the host) reads it through /proc/<agent pid>/fd/WARREN_UPPER_FD/u to cut
 * snapshots. Sandbox processes cannot follow that link: the agent is not dumpable and they lack
 * CAP_SYS_PTRACE. Mirrored as UPPER_FD in launcher.ts. */
#define WARREN_UPPER_FD 5

struct launch_opts {
	const char *id;                           /* [A-Za-z0-9._-], at most 63 bytes */
	const char *hostname;                     /* the UTS name inside (default id); same rule */
	const char *layers[WARREN_MAX_LAYERS];    /* EROFS image files, bottom to top */
	int nlayers;
	const char *upper;                        /* host directory for upper + work (must exist) */
	unsigned long disk_mib;                   /* 0: no tmpfs, the upper lives in `upper` itself */
	const char *socket;                       /* Unix socket path to serve */
	const char *egress;                       /* host directory of the node's egress proxy socket, or NULL: no way out */
	const char *cgroups[WARREN_MAX_CGROUPS];  /* cgroup directories or cgroup.procs files */
	int ncgroups;
	char *arg_area;                           /* the launcher's argv strings, wiped once set up */
	size_t arg_area_len;
};

/* `warren-init launch ...`: returns the process exit code. */
int launch_main(int argc, char **argv);

/* Runs in the cloned child: builds the sandbox, reports on report_fd, then serves as PID 1.
 * Never returns. */
void sandbox_main(const struct launch_opts *o, int listen_fd, int report_fd) __attribute__((noreturn));

/* Sets the hostname (the sandbox's UTS name), raising CAP_SYS_ADMIN into the effective set for
 * that call alone when the agent holds it only as permitted. 0, or -1 with errno. */
int sandbox_rename(const char *name, size_t len);

#endif
