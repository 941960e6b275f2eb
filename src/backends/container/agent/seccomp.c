/* The seccomp filter of sandbox commands: a deny-list on top of the dropped capabilities.
 *
 * Most of what it refuses already fails for want of a capability; the filter is the second
 * wall, and it also closes what capabilities do not: new user namespaces (clone/unshare with
 * CLONE_NEWUSER, the usual way back to a full capability set inside a namespace), the kernel
 * keyring (not namespaced), io_uring, bpf, userfaultfd and perf_event_open (frequent exploit
 * primitives), the x32 ABI and any other architecture's syscall numbers. Denied calls fail with
 * EPERM; clone3 with ENOSYS, so libc falls back to clone, whose flags the filter can read.
 *
 * The BPF structures and constants are the kernel's ABI (linux/filter.h, linux/seccomp.h,
 * linux/audit.h), spelled out here because the static musl build has no kernel headers. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "seccomp.h"

#if defined(__x86_64__)

struct filter_insn { uint16_t code; uint8_t jt, jf; uint32_t k; };
struct filter_prog { unsigned short len; struct filter_insn *insns; };

enum {
	LD_W_ABS = 0x00 | 0x00 | 0x20, /* BPF_LD | BPF_W | BPF_ABS */
	JEQ_K = 0x05 | 0x10,           /* BPF_JMP | BPF_JEQ | BPF_K */
	JGE_K = 0x05 | 0x30,           /* BPF_JMP | BPF_JGE | BPF_K */
	JSET_K = 0x05 | 0x40,          /* BPF_JMP | BPF_JSET | BPF_K */
	RET_K = 0x06
};
#define RET_KILL_PROCESS 0x80000000u
#define RET_ERRNO(e) (0x00050000u | ((e) & 0xffffu))
#define RET_ALLOW 0x7fff0000u
#define ARCH_X86_64 0xc000003eu
#define X32_SYSCALL_BIT 0x40000000u
#define NEWUSER 0x10000000u /* CLONE_NEWUSER */
/* struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (little-endian: low half first). */
#define OFF_NR 0
#define OFF_ARCH 4
#define OFF_ARG0 16
#define SECCOMP_MODE_FILTER_ 2

static const long denied[] = {
	SYS_kexec_load, SYS_kexec_file_load, SYS_reboot,
	SYS_init_module, SYS_finit_module, SYS_delete_module,
	SYS_bpf, SYS_perf_event_open, SYS_userfaultfd,
	SYS_keyctl, SYS_add_key, SYS_request_key,
	SYS_mount, SYS_umount2, SYS_pivot_root, SYS_setns,
	SYS_swapon, SYS_swapoff, SYS_acct, SYS_syslog, SYS_vhangup, SYS_quotactl,
	SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime, SYS_adjtimex,
	SYS_open_by_handle_at, SYS_name_to_handle_at,
	SYS_iopl, SYS_ioperm,
#ifdef SYS_io_uring_setup
	SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
#endif
#ifdef SYS_open_tree
	SYS_open_tree, SYS_move_mount, SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick,
#endif
#ifdef SYS_mount_setattr
	SYS_mount_setattr,
#endif
};
#define NDENIED (sizeof denied / sizeof denied[0])

int seccomp_install_command_filter(void)
{
	struct filter_insn p[6 + 2 * NDENIED + 8];
	unsigned n = 0;
#define I(c, t, f, kk) (p[n++] = (struct filter_insn){ (uint16_t)(c), (uint8_t)(t), (uint8_t)(f), (uint32_t)(kk) })
	/* Another architecture's numbers mean other calls: such a process is killed. */
	I(LD_W_ABS, 0, 0, OFF_ARCH);
	I(JEQ_K, 1, 0, ARCH_X86_64);
	I(RET_K, 0, 0, RET_KILL_PROCESS);
	I(LD_W_ABS, 0, 0, OFF_NR);
	I(JGE_K, 0, 1, X32_SYSCALL_BIT);
	I(RET_K, 0, 0, RET_ERRNO(EPERM));
	for (unsigned i = 0; i < NDENIED; i++) {
		I(JEQ_K, 0, 1, denied[i]);
		I(RET_K, 0, 0, RET_ERRNO(EPERM));
	}
	I(JEQ_K, 0, 1, SYS_clone3);
	I(RET_K, 0, 0, RET_ERRNO(ENOSYS));
	/* clone and unshare: allowed, except with CLONE_NEWUSER in their first argument. */
	I(JEQ_K, 1, 0, SYS_clone);
	I(JEQ_K, 0, 3, SYS_unshare);
	I(LD_W_ABS, 0, 0, OFF_ARG0);
	I(JSET_K, 0, 1, NEWUSER);
	I(RET_K, 0, 0, RET_ERRNO(EPERM));
	I(RET_K, 0, 0, RET_ALLOW);
#undef I
	struct filter_prog prog = { (unsigned short)n, p };
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER_, &prog, 0, 0) < 0 ? -1 : 0;
}

#else

int seccomp_install_command_filter(void) { return 0; }

#endif
