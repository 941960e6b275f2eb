/*
 * Writes the seccomp filter of the `js` child processes, as a BPF program that
 * `bwrap --seccomp FD` loads just before it starts them.
 *
 *   js-filter OUT.bpf
 *
 * Deny by default: a syscall not named here fails with EPERM, so one the kernel adds later is
 * refused too. The list is what Node (its threads, V8's GC, libuv's event loop and the IPC
 * channel the child inherits) needs, and the few syscalls setpriv makes to drop to the
 * sandbox's uid before it becomes node. Left out on purpose, among others: socket (no new
 * connections of any kind: the child talks to its node only over the inherited channel),
 * mount, unshare, setns, ptrace, bpf, keyctl, perf_event_open, userfaultfd, io_uring (libuv
 * falls back to its thread pool), and clone with any namespace flag. clone3 answers ENOSYS,
 * since its flags sit in memory a filter cannot read: glibc then falls back to clone.
 *
 * Built for the machine it runs on (libseccomp's native architecture); a syscall that does not
 * exist there (e.g. `open` on aarch64) is skipped. Kept apart from the container agent's
 * filter so the two can later share a generator.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <unistd.h>

static const char *const ALLOWED[] = {
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

/* Namespace flags of clone: a child may make threads (and plain processes), never namespaces. */
static const unsigned long CLONE_NAMESPACES = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
  CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;

int main (int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.bpf\n", argv[0]);
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (ctx == NULL) {
    fprintf(stderr, "js-filter: seccomp_init failed\n");
    return 1;
  }
  int rc = 0;
  for (const char *const *name = ALLOWED; *name != NULL && rc == 0; name++) {
    int nr = seccomp_syscall_resolve_name(*name);
    if (nr == __NR_SCMP_ERROR) continue; /* not a syscall of this architecture */
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
  }
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NAMESPACES, 0));
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  int fd = rc == 0 ? open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
  if (rc == 0 && fd < 0) rc = -errno;
  if (rc == 0) rc = seccomp_export_bpf(ctx, fd);
  if (fd >= 0 && close(fd) != 0 && rc == 0) rc = -errno;
  seccomp_release(ctx);
  if (rc != 0) {
    fprintf(stderr, "js-filter: cannot write %s: error %d\n", argv[1], rc);
    return 1;
  }
  return 0;
}
