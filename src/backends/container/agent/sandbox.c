/* Sandbox set-up, in the cloned child (PID 1 of new pid, mount, net, ipc, uts and cgroup
 * namespaces), before it turns into the agent:
 *
 *   1. mounts private, so nothing below leaks to the host (and the host's do not leak in);
 *   2. the upper layer: a tmpfs of diskMiB mounted on the host's upper directory, holding the
 *      overlay's upper and work dirs. Writing past it gives ENOSPC inside; it lives only in this
 *      mount namespace, so the host sees an empty directory and nothing is left when the
 *      sandbox dies; its pages are charged to the sandbox's memory cgroup. (diskMiB 0: the upper
 *      lives in the host directory itself, unlimited.) Chosen over a loop-mounted ext4 image or
 *      project quotas: ~0.1 ms to mount, no loop device, no file system requirement on the host.
 *      The agent keeps a descriptor of it at WARREN_UPPER_FD (sandbox.h), the node's one way to
 *      the upper once the old root is gone (snapshots);
 *   3. each EROFS layer mounted from its image file with mount(2) (file-backed, no loop device);
 *   4. overlayfs over them (nodev, nosuid) as the new root;
 *   5. /proc of the new pid namespace with the dangerous parts masked or read-only, /sys
 *      read-only, a minimal /dev (host null zero full random urandom tty bind-mounted; a new
 *      devpts instance; /dev/shm);
 *   6. hostname = --hostname (default the sandbox id), loopback up;
 *   7. pivot_root and detach the old root: from here on no path names a host file;
 *   8. capabilities cut to SAFE_CAPS (bounding, effective, permitted, inheritable, ambient),
 *      no_new_privs, not dumpable (same-uid sandbox processes cannot ptrace the agent);
 *   9. with egress, the node's proxy socket directory bound read-only into /dev and the relay
 *      listening on 127.0.0.1:3128 (relay.c);
 *  10. "ok" to the launcher, then the agent's loop on the inherited listening socket.
 *
 * Any failure is reported to the launcher as one line, and the child exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "agent.h"
#include "sandbox.h"

/* Capability numbers (linux/capability.h; kernel headers are not part of musl). */
enum {
	CAP_CHOWN = 0, CAP_DAC_OVERRIDE = 1, CAP_FOWNER = 3, CAP_FSETID = 4, CAP_KILL = 5,
	CAP_SETGID = 6, CAP_SETUID = 7, CAP_SETPCAP = 8, CAP_NET_BIND_SERVICE = 10, CAP_SYS_CHROOT = 18,
	CAP_SYS_ADMIN = 21,
};
/* What root inside a sandbox may still do: own and chmod its files, switch users, signal its
 * processes, bind low ports on its loopback, chroot. Notably absent: SYS_ADMIN (mount, ...),
 * MKNOD (device nodes), NET_RAW/NET_ADMIN, SYS_PTRACE, SYS_MODULE, SYS_RAWIO, SYS_RESOURCE. */
static const uint64_t SAFE_CAPS =
	1ULL << CAP_CHOWN | 1ULL << CAP_DAC_OVERRIDE | 1ULL << CAP_FOWNER | 1ULL << CAP_FSETID |
	1ULL << CAP_KILL | 1ULL << CAP_SETGID | 1ULL << CAP_SETUID | 1ULL << CAP_SETPCAP |
	1ULL << CAP_NET_BIND_SERVICE | 1ULL << CAP_SYS_CHROOT;

#define LINUX_CAPABILITY_VERSION_3 0x20080522
struct cap_header { uint32_t version; int pid; };
struct cap_data { uint32_t effective, permitted, inheritable; };

static int report_fd = -1;

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	char msg[900];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg - 1, fmt, ap);
	va_end(ap);
	if (n < 0) n = 0;
	if (n > (int)sizeof msg - 2) n = (int)sizeof msg - 2;
	msg[n++] = '\n';
	ssize_t w = write(report_fd, msg, (size_t)n);
	(void)w;
	_exit(1);
}

static void must_mount(const char *src, const char *dst, const char *type, unsigned long flags, const char *data)
{
	if (mount(src, dst, type, flags, data) < 0)
		die("mount %s on %s (%s): %s", src ? src : "none", dst, type ? type : "bind", strerror(errno));
}

static void mkdir_ok(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST) die("mkdir %s: %s", path, strerror(errno));
}

/* An empty file to bind a device or a mask over. */
static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) die("create %s: %s", path, strerror(errno));
	close(fd);
}

/* The writable layer's directory (the cwd) at WARREN_UPPER_FD, close-on-exec so no command
 * inherits it. Read-only is enough: the node only reads through it. */
static void keep_upper_fd(void)
{
	int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) die("open the upper directory: %s", strerror(errno));
	if (fd == WARREN_UPPER_FD) return;
	if (dup3(fd, WARREN_UPPER_FD, O_CLOEXEC) < 0) die("dup3 the upper directory: %s", strerror(errno));
	close(fd);
}

static void upper_and_layers(const struct launch_opts *o)
{
	if (o->disk_mib > 0) {
		/* nr_inodes bounds the kernel memory a file flood can take (tmpfs size counts pages only). */
		unsigned long inodes = o->disk_mib * 64 < 16384 ? 16384 : o->disk_mib * 64;
		char opts[96];
		snprintf(opts, sizeof opts, "size=%lum,nr_inodes=%lu,mode=0700", o->disk_mib, inodes);
		must_mount("warren-upper", o->upper, "tmpfs", MS_NOSUID | MS_NODEV, opts);
	}
	/* Relative names keep the overlay option string short however many layers there are. */
	if (chdir(o->upper) < 0) die("chdir %s: %s", o->upper, strerror(errno));
	keep_upper_fd();
	mkdir_ok("u", 0755);
	mkdir_ok("w", 0700);
	mkdir_ok("r", 0755);
	char opts[4096];
	size_t at = (size_t)snprintf(opts, sizeof opts, "lowerdir=");
	for (int i = o->nlayers - 1; i >= 0; i--) {
		char dir[16];
		snprintf(dir, sizeof dir, "l%d", i);
		mkdir_ok(dir, 0755);
		must_mount(o->layers[i], dir, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID, NULL);
		/* overlay lists the top layer first */
		at += (size_t)snprintf(opts + at, sizeof opts - at, "%s%s", dir, i > 0 ? ":" : "");
	}
	snprintf(opts + at, sizeof opts - at, ",upperdir=u,workdir=w");
	must_mount("overlay", "r", "overlay", MS_NODEV | MS_NOSUID, opts);
}

/* Read-only bind of a path onto itself (skipped if the kernel has no such file). */
static void bind_ro(const char *path)
{
	if (access(path, F_OK) < 0) return;
	must_mount(path, path, NULL, MS_BIND | MS_REC, NULL);
	must_mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static void mask_file(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) return;
	if (S_ISDIR(st.st_mode)) must_mount("warren-mask", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0");
	else must_mount("/dev/null", path, NULL, MS_BIND, NULL);
}

/* /proc of the new pid namespace. Root inside shares the host's user namespace, so writable
 * sysctls or sysrq-trigger would reach the host kernel: those become read-only, and files that
 * leak kernel state are masked. */
static void proc_and_sys(void)
{
	mkdir_ok("r/proc", 0555);
	must_mount("proc", "r/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	static const char *ro[] = { "r/proc/sys", "r/proc/sysrq-trigger", "r/proc/irq", "r/proc/bus", "r/proc/fs" };
	for (size_t i = 0; i < sizeof ro / sizeof *ro; i++) bind_ro(ro[i]);
	static const char *masked[] = {
		"r/proc/kcore", "r/proc/keys", "r/proc/timer_list", "r/proc/sched_debug", "r/proc/latency_stats",
		"r/proc/acpi", "r/proc/scsi", "r/proc/kallsyms", "r/proc/kmsg"
	};
	for (size_t i = 0; i < sizeof masked / sizeof *masked; i++) mask_file(masked[i]);
	mkdir_ok("r/sys", 0555);
	/* sysfs mounted in the new net namespace lists only its devices (lo). */
	must_mount("sysfs", "r/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static void dev(unsigned long disk_mib, const char *egress)
{
	mkdir_ok("r/dev", 0755);
	must_mount("warren-dev", "r/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755");
	static const char *devices[] = { "null", "zero", "full", "random", "urandom", "tty" };
	for (size_t i = 0; i < sizeof devices / sizeof *devices; i++) {
		char host[32], inside[32];
		snprintf(host, sizeof host, "/dev/%s", devices[i]);
		snprintf(inside, sizeof inside, "r/dev/%s", devices[i]);
		touch(inside);
		must_mount(host, inside, NULL, MS_BIND, NULL);
	}
	mkdir_ok("r/dev/pts", 0755);
	must_mount("devpts", "r/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5");
	if (symlink("pts/ptmx", "r/dev/ptmx") < 0) die("symlink /dev/ptmx: %s", strerror(errno));
	mkdir_ok("r/dev/shm", 01777);
	char opts[64];
	unsigned long shm = disk_mib > 0 && disk_mib < 64 ? disk_mib : 64;
	snprintf(opts, sizeof opts, "size=%lum,mode=1777", shm);
	must_mount("shm", "r/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts);
	static const char *links[][2] = {
		{ "/proc/self/fd", "r/dev/fd" }, { "/proc/self/fd/0", "r/dev/stdin" },
		{ "/proc/self/fd/1", "r/dev/stdout" }, { "/proc/self/fd/2", "r/dev/stderr" },
	};
	for (size_t i = 0; i < sizeof links / sizeof *links; i++)
		if (symlink(links[i][0], links[i][1]) < 0) die("symlink %s: %s", links[i][1], strerror(errno));
	/* The directory of the node's egress proxy socket, in our own /dev: a path in the image (a
	 * symlink, say) could lead the bind anywhere on the host, this tmpfs cannot. The agent relays
	 * 127.0.0.1:3128 to the socket in it. Read-only: it is a host directory, outside the disk
	 * quota, and connect(2) needs no write access to the mount (only to the socket inode). A
	 * directory, not the socket, so a proxy started again after a node restart is found; bound
	 * rather than held open by the agent, so no descriptor of a host directory sits in PID 1. */
	if (egress) {
		mkdir_ok("r" EGRESS_DIR, 0755);
		must_mount(egress, "r" EGRESS_DIR, NULL, MS_BIND, NULL);
		must_mount(NULL, "r" EGRESS_DIR, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	}
	/* Nothing may be created in /dev from here on (there is no MKNOD anyway; this also stops files). */
	must_mount(NULL, "r/dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755");
}

static void loopback_up(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) die("socket: %s", strerror(errno));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) die("SIOCGIFFLAGS lo: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) die("SIOCSIFFLAGS lo: %s", strerror(errno));
	close(fd);
}

static void enter_root(void)
{
	if (chdir("r") < 0) die("chdir to the new root: %s", strerror(errno));
	/* pivot_root(".", "."): the old root ends up stacked under the new one, and the detach
	 * takes it away, with every host mount this namespace had copied. */
	if (syscall(SYS_pivot_root, ".", ".") < 0) die("pivot_root: %s", strerror(errno));
	if (umount2(".", MNT_DETACH) < 0) die("detach the old root: %s", strerror(errno));
	if (chdir("/") < 0) die("chdir /: %s", strerror(errno));
}

static void drop_capabilities(void)
{
	for (int cap = 0; cap < 64; cap++) {
		if (SAFE_CAPS & (1ULL << cap)) continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) die("drop capability %d: %s", cap, strerror(errno));
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) die("clear ambient capabilities: %s", strerror(errno));
	struct cap_header h = { LINUX_CAPABILITY_VERSION_3, 0 };
	struct cap_data d[2];
	memset(d, 0, sizeof d);
	/* The agent's own set. With no_new_privs a command run as root gets at most the agent's
	 * permitted set at execve, so the agent holds SAFE_CAPS for them; of those it uses itself:
	 * DAC_OVERRIDE and FOWNER (the files API acts as root on any file: read, write, chmod),
	 * SETUID and SETGID (a command started as the uid and gid its request names), KILL (ending
	 * a command whatever its uid). CHOWN, FSETID, SETPCAP, NET_BIND_SERVICE and SYS_CHROOT are
	 * there only for root's commands.
	 * SYS_ADMIN is permitted but not effective: nothing the agent does at run time needs it (the
	 * mounts are made, the relay only connects, file operations need none) except renaming a
	 * pooled sandbox when it is handed out, which raises it for that one sethostname
	 * (sandbox_rename). It is out of the bounding set, so no program the agent runs can have it
	 * after execve; and only the host reaches the agent's socket. */
	d[0].permitted = (uint32_t)(SAFE_CAPS | 1ULL << CAP_SYS_ADMIN);
	d[1].permitted = (uint32_t)((SAFE_CAPS | 1ULL << CAP_SYS_ADMIN) >> 32);
	d[0].effective = (uint32_t)SAFE_CAPS;
	d[1].effective = (uint32_t)(SAFE_CAPS >> 32);
	if (syscall(SYS_capset, &h, d) < 0) die("capset: %s", strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("no_new_privs: %s", strerror(errno));
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

int sandbox_rename(const char *name, size_t len)
{
	struct cap_header h = { LINUX_CAPABILITY_VERSION_3, 0 };
	struct cap_data d[2];
	if (syscall(SYS_capget, &h, d) < 0) return -1;
	uint32_t effective = d[0].effective;
	d[0].effective |= d[0].permitted & (1u << CAP_SYS_ADMIN);
	if (d[0].effective != effective && syscall(SYS_capset, &h, d) < 0) return -1;
	int r = sethostname(name, len), err = errno;
	if (d[0].effective != effective) {
		d[0].effective = effective;
		/* Cannot fail: lowering the effective set needs no privilege. */
		if (syscall(SYS_capset, &h, d) < 0) _exit(1);
	}
	errno = err;
	return r;
}

/* The agent must outlive an OOM in its own memory cgroup to report it. The legacy oom_adj
 * file sets the score without lowering the floor (oom_score_adj_min) its children inherit, so
 * a sandbox process can raise its own score back to 0 but never make itself unkillable. */
static void shield_from_oom(void)
{
	int fd = open("/proc/self/oom_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0) return;
	ssize_t w = write(fd, "-17", 3);
	(void)w;
	close(fd);
}

/* Leaves exactly: 0-2 on /dev/null, 3 the listening socket, 4 the report pipe (5, the upper's
 * descriptor, is opened later by upper_and_layers). */
static void tidy_fds(int *listen_fd, int *rep_fd)
{
	int null = open("/dev/null", O_RDWR);
	if (null < 0) die("open /dev/null: %s", strerror(errno));
	/* Move the two keepers above the range first, so dup2 into 3 and 4 cannot clobber them. */
	int l = fcntl(*listen_fd, F_DUPFD_CLOEXEC, 10), r = fcntl(*rep_fd, F_DUPFD_CLOEXEC, 10);
	if (l < 0 || r < 0) die("dup: %s", strerror(errno));
	for (int fd = 0; fd < 3; fd++) dup2(null, fd);
	if (dup3(l, 3, O_CLOEXEC) < 0 || dup3(r, 4, O_CLOEXEC) < 0) die("dup3: %s", strerror(errno));
	report_fd = 4;
	syscall(SYS_close_range, 5U, ~0U, 0U);
	*listen_fd = 3;
	*rep_fd = 4;
}

void sandbox_main(const struct launch_opts *o, int listen_fd, int rep_fd)
{
	report_fd = rep_fd;
	/* Die with the launcher while setting up: an abandoned half-built sandbox has no owner. */
	/* (If the launcher died before this line, the final write below fails and we exit.) */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	tidy_fds(&listen_fd, &rep_fd);
	must_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	upper_and_layers(o);
	proc_and_sys();
	dev(o->disk_mib, o->egress);
	const char *name = o->hostname ? o->hostname : o->id;
	if (sethostname(name, strlen(name)) < 0) die("sethostname: %s", strerror(errno));
	loopback_up();
	shield_from_oom();
	enter_root();
	drop_capabilities();
	umask(022);
	/* /proc/1/cmdline inside would show the launcher's host paths: show only the name. */
	if (o->arg_area && o->arg_area_len > sizeof "warren-init") {
		memset(o->arg_area, 0, o->arg_area_len);
		strcpy(o->arg_area, "warren-init");
	}
	if (relay_start() < 0) die("egress relay on 127.0.0.1:%d: %s", RELAY_PORT, strerror(errno));
	prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
	if (write(report_fd, "ok\n", 3) != 3) _exit(1); /* the launcher is gone: nobody knows us */
	close(report_fd);
	_exit(agent_run(listen_fd, NULL));
}
