/* The seccomp policy of sandbox commands: an allow-list. Docker's default profile was the
 * reference for what ordinary programs need; the list is ours.
 *
 * What is not named here is refused with ENOSYS: to a program it looks like a kernel too old to
 * have the call, which every libc and runtime already handles (statx, faccessat2, fchmodat2,
 * clone3, close_range... all have fallbacks). That is also how a call a later kernel adds is
 * treated, until someone reads what it does and names it here: the filter fails closed.
 * Calls libseccomp 2.5.4 (Debian bookworm) has no name for are not named for that reason
 * (futex_wake/wait/requeue, statmount, listmount, lsm_*, mseal, the *xattrat family...).
 *
 * Calls that exist and that we refuse on purpose answer EPERM, what the kernel itself tells an
 * unprivileged caller, so a program says "Operation not permitted" rather than "not
 * implemented". Most of them would fail anyway for want of a capability; the filter is the
 * second wall, and the only one for the calls no capability guards (new user namespaces, the
 * keyring, io_uring, userfaultfd...).
 *
 * Another architecture's calls (i386 through int 0x80, x32, arm32) are refused with ENOSYS as a
 * whole: the filter is generated for one ABI per architecture (gen.c). The agent includes it as
 * a header with one program per architecture (seccomp-gen header sandbox OUT.h). */
#include <errno.h>
#include <stddef.h>
#include "policy.h"

static const char *const allowed[] = {
	/* Files and directories: open, read, write, stat, rename, link, permissions, extended
	 * attributes (what a file system grants still depends on owner, mode and capabilities). */
	"open", "openat", "openat2", "creat", "close", "close_range", "read", "write", "readv", "writev",
	"pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "lseek", "dup", "dup2", "dup3",
	"fcntl", "flock", "ioctl", "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
	"access", "faccessat", "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
	"mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
	"link", "linkat", "symlink", "symlinkat", "readlink", "readlinkat", "mknod", "mknodat",
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask",
	"truncate", "ftruncate", "fallocate", "fadvise64", "readahead", "utime", "utimes", "futimesat",
	"utimensat", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
	"sendfile", "splice", "tee", "vmsplice", "copy_file_range", "cachestat",
	"getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr",
	"listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	/* Memory. */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "remap_file_pages",
	"mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier", "memfd_create",
	"pkey_alloc", "pkey_free", "pkey_mprotect", "map_shadow_stack",
	/* Processes and threads (clone is below, with a condition). exec, wait, exit; the thread
	 * and rseq registration glibc does; arch_prctl for TLS on x86_64. */
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
	"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv",
	"arch_prctl", "prctl", "get_thread_area", "set_thread_area", "restart_syscall",
	"getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid",
	"pidfd_open", "pidfd_send_signal", "pidfd_getfd", "process_mrelease",
	/* Debugging one's own processes: the kernel re-checks this filter after a tracer changes a
	 * call (since 4.8), and the agent is not dumpable, so a tracer reaches only its own kind. */
	"ptrace", "process_vm_readv", "process_vm_writev",
	/* Users, groups and capabilities: changing them is governed by the capabilities a command
	 * has, which never exceed the sandbox's bounding set. */
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"setfsuid", "setfsgid", "capget", "capset",
	/* Further confinement a program asks for itself (a filter or a Landlock ruleset can only
	 * narrow what it may do), and chroot, which the sandbox's CAP_SYS_CHROOT lets root use. */
	"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "chroot",
	/* Signals. */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
	"rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack",
	"kill", "tkill", "tgkill", "signalfd", "signalfd4", "pause",
	/* Time and timers (reading the clocks; setting them is refused below). */
	"time", "gettimeofday", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
	"alarm", "getitimer", "setitimer", "times",
	"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
	"timerfd_create", "timerfd_settime", "timerfd_gettime",
	/* Waiting on many descriptors. */
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
	/* Sockets (socket itself is below, with a condition). The sandbox's network namespace has
	 * loopback and the egress relay only; raw sockets need CAP_NET_RAW, which it lacks. */
	"socketpair", "bind", "listen", "accept", "accept4", "connect", "shutdown",
	"getsockname", "getpeername", "getsockopt", "setsockopt",
	"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
	/* Scheduling, limits and system information (cgroups bound what a sandbox may take). */
	"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
	"sched_getscheduler", "sched_setscheduler", "sched_getattr", "sched_setattr",
	"sched_get_priority_min", "sched_get_priority_max", "sched_rr_get_interval",
	"getpriority", "setpriority", "ioprio_get", "ioprio_set",
	"getrlimit", "setrlimit", "prlimit64", "getrusage", "getcpu", "sysinfo", "uname", "getrandom",
	/* System V and POSIX IPC: private to the sandbox's IPC namespace. */
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
	"msgget", "msgsnd", "msgrcv", "msgctl",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	/* Asynchronous I/O of the old kind (libaio; io_uring is refused below). */
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
	NULL
};

static const char *const refused_eperm[] = {
	/* Mounts and namespaces: the sandbox's file system and namespaces are the agent's to make. */
	"mount", "umount2", "pivot_root", "setns", "open_tree", "move_mount", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr",
	/* The kernel itself: modules, kexec, reboot, swap, accounting, its log, quotas. */
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
	"swapon", "swapoff", "acct", "syslog", "quotactl", "quotactl_fd", "vhangup",
	/* The host's clocks and names (the UTS name is the agent's to set). */
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
	/* Frequent exploit primitives that ordinary programs do without: BPF, perf, userfaultfd,
	 * io_uring (libuv and others fall back to epoll and threads), the keyring (not namespaced),
	 * file handles (open_by_handle_at walks out of any root), raw I/O ports. */
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"add_key", "request_key", "keyctl", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm",
	/* NUMA placement: the cgroup's cpuset decides where a sandbox runs. */
	"mbind", "set_mempolicy", "get_mempolicy", "migrate_pages", "move_pages",
	NULL
};

static const char *const refused_enosys[] = {
	/* clone3 passes its flags in memory, which a filter cannot read: refused as "not
	 * implemented", so libc falls back to clone, whose flags it can. */
	"clone3",
	NULL
};

/* The namespace flags of clone and unshare: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
 * NEWPID, NEWNET. A new user namespace would hand a command every capability inside it. */
#define NAMESPACE_FLAGS 0x7e020000ULL
#define CLONE_NEWTIME_ 0x80ULL /* unshare only: in clone's first argument those bits are the exit signal */

static const struct policy_cond conditional[] = {
	/* Threads and processes, never in new namespaces. */
	{ "clone", NONE_OF_BITS, NAMESPACE_FLAGS, { 0 }, 0, EPERM },
	/* unshare of files, fs or sysvsem alone is harmless; of any namespace, refused. */
	{ "unshare", NONE_OF_BITS, NAMESPACE_FLAGS | CLONE_NEWTIME_, { 0 }, 0, EPERM },
	/* The personalities Docker allows: Linux, 32-bit uname (PER_LINUX32), UNAME26, both, and the
	 * query (0xffffffff). Not ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC (ENOSYS: the values are too
	 * far apart for their own errno, see gen.c). */
	{ "personality", ONE_OF_VALUES, 0, { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff }, 5, ENOSYS },
	/* Unix, IPv4, IPv6 and netlink (glibc asks rtnetlink for addresses). Everything else, vsock
	 * to the host among them, answers as a kernel without that family does. */
	{ "socket", ONE_OF_VALUES, 0, { 1 /* AF_UNIX */, 2 /* AF_INET */, 10 /* AF_INET6 */, 16 /* AF_NETLINK */ }, 4, EAFNOSUPPORT },
};

const struct policy sandbox_policy = {
	.name = "sandbox",
	.default_errno = ENOSYS,
	.foreign_abi = ENOSYS,
	.allowed = allowed,
	.refused_eperm = refused_eperm,
	.refused_enosys = refused_enosys,
	.conditional = conditional,
	.nconditional = sizeof conditional / sizeof conditional[0],
};
