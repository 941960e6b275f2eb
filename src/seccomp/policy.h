/* warren's seccomp policies, as data (sandbox-policy.c, js-policy.c), and what the generator
 * (gen.c) needs to know about their shape. Build-time only: nothing here is compiled into the
 * agent or loaded by node; what they load is the BPF that gen.c writes. */
#ifndef WARREN_SECCOMP_POLICY_H
#define WARREN_SECCOMP_POLICY_H
#include <stdint.h>

/* A call allowed only when its first argument passes a test; refused with `refuse` otherwise. */
struct policy_cond {
	const char *name;
	enum { NONE_OF_BITS, ONE_OF_VALUES } test;
	uint64_t bits;         /* NONE_OF_BITS: allowed when arg0 has none of these bits */
	uint64_t values[8];    /* ONE_OF_VALUES: allowed when arg0 is one of these (nvalues of them) */
	int nvalues;
	int refuse;            /* the errno otherwise (ONE_OF_VALUES: the default, or all values below 64) */
};

/* `foreign_abi` of a policy whose calls from another ABI kill the whole process: a program
 * that has no reason to make them is ended at once, not left with one thread gone. */
#define FOREIGN_ABI_KILL (-1)

/* One filter. The lists are NULL-terminated syscall names. A name the target architecture lacks
 * (open on aarch64) is skipped for it; a name no target knows fails the build (a typo, most
 * likely). A name whose action is the default's documents the choice and is checked, nothing more. */
struct policy {
	const char *name;              /* as the command line names it: seccomp-gen bpf NAME OUT */
	int default_errno;             /* what a call the policy does not name gets */
	int foreign_abi;               /* an errno, or FOREIGN_ABI_KILL: i386 and x32 on x86_64, arm32 on aarch64 */
	const char *const *allowed;
	const char *const *refused_eperm;
	const char *const *refused_enosys;
	const struct policy_cond *conditional;
	int nconditional;
};

/* The policy of sandbox commands (the container agent's header). */
extern const struct policy sandbox_policy;
/* The policy of the function backend's jailed `js` child processes (bwrap's program). */
extern const struct policy js_policy;

#endif
