/* The seccomp filter of sandbox commands: the allow-list of src/seccomp/sandbox-policy.c, compiled
 * to BPF at build time by seccomp-gen (with libseccomp, for every supported architecture) into
 * seccomp-policy.h. Installing it needs no library: one prctl. An architecture without a
 * generated program does not build (see the header's #error), so no agent runs unfiltered.
 *
 * The BPF structures are the kernel's ABI (linux/filter.h, linux/seccomp.h), spelled out here
 * because the static musl build has no kernel headers. */
#include <stdint.h>
#include <sys/prctl.h>
#include "seccomp.h"

struct filter_insn { uint16_t code; uint8_t jt, jf; uint32_t k; };
struct filter_prog { unsigned short len; const struct filter_insn *insns; };
#define SECCOMP_MODE_FILTER_ 2

#include "seccomp-policy.h"

static int disabled;

void seccomp_disable_for_vm(void)
{
	disabled = 1;
}

int seccomp_install_command_filter(void)
{
	if (disabled) return 0;
	struct filter_prog prog = { (unsigned short)(sizeof seccomp_policy / sizeof seccomp_policy[0]), seccomp_policy };
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER_, &prog, 0, 0) < 0 ? -1 : 0;
}
