/* The seccomp policy of sandbox commands, as data (policy.c), and what the generator (gen.c)
 * needs to know about its shape. Build-time only: nothing here is compiled into the agent. */
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
	int refuse;            /* the errno otherwise (ONE_OF_VALUES: ENOSYS, or all values below 64) */
};

/* NULL-terminated lists of syscall names. A name the target architecture lacks (open on
 * aarch64) is skipped for it; a name no target knows fails the build (a typo, most likely). */
extern const char *const policy_allowed[];
extern const char *const policy_refused_eperm[];
extern const char *const policy_refused_enosys[];
extern const struct policy_cond policy_conditional[];
extern const int policy_nconditional;

#endif
