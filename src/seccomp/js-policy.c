/* The seccomp policy of the function backend's `js` child processes: an allow-list that bwrap
 * loads just before it starts them (seccomp-gen bpf js OUT.bpf, for the machine it runs on).
 *
 * Deny by default: a syscall not named here fails with EPERM, so one the kernel adds later is
 * refused too. The list is what Node (its threads, V8's GC, libuv's event loop and the IPC
 * channel the child inherits) needs, and the few syscalls setpriv makes to drop to the
 * sandbox's uid before it becomes node. Left out on purpose, among others: socket (no new
 * connections of any kind: the child talks to its node only over the inherited channel),
 * mount, unshare, setns, ptrace, bpf, keyctl, perf_event_open, userfaultfd, io_uring (libuv
 * falls back to its thread pool), and clone with any namespace flag. clone3 answers ENOSYS,
 * since its flags sit in memory a filter cannot read: glibc then falls back to clone.
 * A call from another ABI (i386 or x32 on x86_64, arm32 on aarch64) kills the process. */
#include <errno.h>
#include <stddef.h>
#include "policy.h"

static const char *const allowed[] = {
	/* memory: the heap, V8's code space and GC */
	"brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "membarrier",
	"pkey_alloc", "pkey_free", "pkey_mprotect",
	/* threads and their synchronisation (clone itself is below) */
	"futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "gettid",
	"sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
	"sched_get_priority_max", "sched_get_priority_min", "arch_prctl", "prctl",
	/* signals, including the abort at the heap limit and the watch's SIGKILL of its own process */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"sigaltstack", "kill", "tgkill", "tkill", "restart_syscall",
	/* file descriptors: the IPC channel, pipes and libuv's event loop */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "close", "close_range",
	"dup", "dup2", "dup3", "fcntl", "ioctl", "lseek", "pipe", "pipe2", "eventfd2",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"poll", "ppoll", "select", "pselect6", "recvmsg", "sendmsg", "recvfrom", "sendto",
	"shutdown", "getsockopt", "setsockopt", "getsockname", "getpeername",
	/* reading the (read-only) files of node and of the child's code */
	"open", "openat", "stat", "fstat", "lstat", "newfstatat", "statx", "access", "faccessat",
	"faccessat2", "readlink", "readlinkat", "getdents64", "getcwd", "chdir", "fchdir",
	"statfs", "fstatfs", "fadvise64", "umask",
	/* time */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
	/* who and what the process is */
	"getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid",
	"getresgid", "getpgrp", "getpgid", "getsid", "uname", "sysinfo", "getrandom",
	"getrlimit", "prlimit64", "getrusage", "times", "getcpu",
	/* setpriv dropping to the sandbox's uid; for an unprivileged process they can only lower */
	"capget", "capset", "setgroups", "setresuid", "setresgid", "setuid", "setgid",
	/* bwrap starts setpriv, which starts node */
	"execve", "exit", "exit_group", "wait4",
	NULL
};

/* clone3 passes its flags in memory, which a filter cannot read: "not implemented", so glibc
 * falls back to clone, whose flags it can. */
static const char *const refused_enosys[] = { "clone3", NULL };

/* Nothing is refused with EPERM by name: that is the default. */
static const char *const refused_eperm[] = { NULL };

/* The namespace flags of clone: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET. */
#define NAMESPACE_FLAGS 0x7e020000ULL

static const struct policy_cond conditional[] = {
	/* A child may make threads (and plain processes), never namespaces. */
	{ "clone", NONE_OF_BITS, NAMESPACE_FLAGS, { 0 }, 0, EPERM },
};

const struct policy js_policy = {
	.name = "js",
	.default_errno = EPERM,
	.foreign_abi = FOREIGN_ABI_KILL,
	.allowed = allowed,
	.refused_eperm = refused_eperm,
	.refused_enosys = refused_enosys,
	.conditional = conditional,
	.nconditional = sizeof conditional / sizeof conditional[0],
};
