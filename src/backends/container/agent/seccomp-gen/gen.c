/* seccomp-gen: turns the policy (policy.c) into a C header of classic-BPF programs, one per
 * supported architecture, for the static agent to load (../seccomp.c).
 *
 *   seccomp-gen OUT.h
 *
 * Runs at build time on the build host, linked against libseccomp: libseccomp knows each
 * architecture's syscall numbers and writes a filter for any of them (seccomp_arch_add/remove),
 * so the agent itself needs neither libseccomp nor kernel headers. Each program checks the
 * architecture first; another ABI on the same CPU (i386, x32 on x86_64; arm32 on aarch64)
 * gets ENOSYS for everything. The instructions are written little-endian, as both targets are. */
#define _GNU_SOURCE
#include <errno.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "policy.h"

/* What a call the policy does not name gets. */
#define DEFAULT_ACTION SCMP_ACT_ERRNO(ENOSYS)

struct target { const char *name; uint32_t arch; const char *cpp; };
static const struct target targets[] = {
	{ "x86_64", SCMP_ARCH_X86_64, "__x86_64__" },
	{ "aarch64", SCMP_ARCH_AARCH64, "__aarch64__" },
};
#define NTARGETS (sizeof targets / sizeof targets[0])

static void __attribute__((noreturn)) fail(const char *what, const char *name, int rc)
{
	fprintf(stderr, "seccomp-gen: %s %s: %s\n", what, name ? name : "", strerror(rc < 0 ? -rc : rc));
	exit(1);
}

/* The number to give seccomp_rule_add (the build host's, or libseccomp's pseudo number), or
 * -1 when the target has no such call. A name no target knows stops the build. */
static int number_on(const struct target *t, const char *name)
{
	int known = 0;
	for (size_t i = 0; i < NTARGETS; i++)
		if (seccomp_syscall_resolve_name_arch(targets[i].arch, name) >= 0) known = 1;
	if (!known) fail("no architecture has a syscall named", name, EINVAL);
	if (seccomp_syscall_resolve_name_arch(t->arch, name) < 0) return -1;
	return seccomp_syscall_resolve_name(name);
}

static void add(scmp_filter_ctx ctx, const struct target *t, uint32_t action, const char *name,
	unsigned n, const struct scmp_arg_cmp *cmp)
{
	int nr = number_on(t, name);
	/* The default's action is not a rule libseccomp takes: such a name documents, and is checked. */
	if (nr == -1 || action == DEFAULT_ACTION) return;
	int rc = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	if (rc < 0) fail("rule for", name, rc);
}

static void add_list(scmp_filter_ctx ctx, const struct target *t, uint32_t action, const char *const *names)
{
	for (const char *const *p = names; *p; p++) add(ctx, t, action, *p, 0, NULL);
}

static void add_conditional(scmp_filter_ctx ctx, const struct target *t, const struct policy_cond *c)
{
	uint32_t refuse = SCMP_ACT_ERRNO((uint32_t)c->refuse);
	if (c->test == NONE_OF_BITS) {
		struct scmp_arg_cmp none = SCMP_A0(SCMP_CMP_MASKED_EQ, c->bits, 0);
		add(ctx, t, SCMP_ACT_ALLOW, c->name, 1, &none);
		/* Refused when any one of the bits is set: one rule per bit (rules of a call are or-ed). */
		for (int bit = 0; bit < 64; bit++) {
			uint64_t b = 1ULL << bit;
			if (!(c->bits & b)) continue;
			struct scmp_arg_cmp has = SCMP_A0(SCMP_CMP_MASKED_EQ, b, b);
			add(ctx, t, refuse, c->name, 1, &has);
		}
		return;
	}
	uint64_t max = 0;
	for (int i = 0; i < c->nvalues; i++) {
		struct scmp_arg_cmp is = SCMP_A0(SCMP_CMP_EQ, c->values[i]);
		add(ctx, t, SCMP_ACT_ALLOW, c->name, 1, &is);
		if (c->values[i] > max) max = c->values[i];
	}
	if (c->refuse == ENOSYS) return; /* the default already */
	/* libseccomp takes one comparison per argument and rule, and a rule without one would
	 * override the values allowed: "none of these" is spelt as "above the largest" plus each
	 * value in the gaps, so only small value sets (socket families) may have their own errno. */
	if (max >= 64) fail("ONE_OF_VALUES with its own errno needs values below 64:", c->name, EINVAL);
	struct scmp_arg_cmp above = SCMP_A0(SCMP_CMP_GT, max);
	add(ctx, t, refuse, c->name, 1, &above);
	for (uint64_t v = 0; v < max; v++) {
		int allowed = 0;
		for (int i = 0; i < c->nvalues; i++) if (c->values[i] == v) allowed = 1;
		if (allowed) continue;
		struct scmp_arg_cmp is = SCMP_A0(SCMP_CMP_EQ, v);
		add(ctx, t, refuse, c->name, 1, &is);
	}
}

/* The filter for one target as BPF instructions; returns their count, *out malloc'ed. */
static size_t generate(const struct target *t, uint8_t **out)
{
	scmp_filter_ctx ctx = seccomp_init(DEFAULT_ACTION);
	if (!ctx) fail("seccomp_init", NULL, ENOMEM);
	int rc;
	if (seccomp_arch_exist(ctx, t->arch) != 0 && (rc = seccomp_arch_add(ctx, t->arch)) < 0) fail("add architecture", t->name, rc);
	if (seccomp_arch_native() != t->arch && (rc = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE)) < 0) fail("remove the build host's architecture for", t->name, rc);
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS))) < 0) fail("bad-architecture action", NULL, rc);
	/* A binary search over syscall numbers rather than a chain: ~9 comparisons per call, not ~300. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0) fail("optimize", NULL, rc);
	add_list(ctx, t, SCMP_ACT_ALLOW, policy_allowed);
	add_list(ctx, t, SCMP_ACT_ERRNO(EPERM), policy_refused_eperm);
	add_list(ctx, t, SCMP_ACT_ERRNO(ENOSYS), policy_refused_enosys);
	for (int i = 0; i < policy_nconditional; i++) add_conditional(ctx, t, &policy_conditional[i]);

	FILE *tmp = tmpfile();
	if (!tmp) fail("tmpfile", NULL, errno);
	if ((rc = seccomp_export_bpf(ctx, fileno(tmp))) < 0) fail("export the filter for", t->name, rc);
	seccomp_release(ctx);
	long len = lseek(fileno(tmp), 0, SEEK_END);
	if (len <= 0 || len % 8) fail("exported filter has a bad length for", t->name, EINVAL);
	*out = malloc((size_t)len);
	if (!*out || pread(fileno(tmp), *out, (size_t)len, 0) != len) fail("read back the filter for", t->name, EIO);
	fclose(tmp);
	return (size_t)len / 8;
}

int main(int argc, char **argv)
{
	if (argc != 2) { fprintf(stderr, "usage: seccomp-gen OUT.h\n"); return 2; }
	char tmpname[4096];
	snprintf(tmpname, sizeof tmpname, "%s.tmp", argv[1]);
	FILE *f = fopen(tmpname, "w");
	if (!f) fail("create", tmpname, errno);
	fprintf(f, "/* Generated by seccomp-gen from seccomp-gen/policy.c at build time: do not edit. */\n");
	for (size_t i = 0; i < NTARGETS; i++) {
		uint8_t *insns;
		size_t n = generate(&targets[i], &insns);
		if (n > 4096) fail("filter longer than the kernel's 4096 instructions for", targets[i].name, E2BIG);
		fprintf(f, "#%s defined(%s)\n", i == 0 ? "if" : "elif", targets[i].cpp);
		fprintf(f, "#define WARREN_SECCOMP_TARGET \"%s\"\n", targets[i].name);
		fprintf(f, "static const struct filter_insn seccomp_policy[%zu] = {\n", n);
		for (size_t k = 0; k < n; k++) {
			const uint8_t *p = insns + 8 * k; /* struct sock_filter: u16 code, u8 jt, u8 jf, u32 k */
			fprintf(f, "\t{ 0x%04x, %u, %u, 0x%08x },\n", p[0] | p[1] << 8, p[2], p[3],
				(uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24);
		}
		fprintf(f, "};\n");
		free(insns);
	}
	/* Fail closed at compile time too: an agent for another architecture is not built without a filter. */
	fprintf(f, "#else\n#error \"no seccomp policy for this architecture: add it to seccomp-gen/gen.c\"\n#endif\n");
	if (fclose(f) != 0) fail("write", tmpname, errno);
	if (rename(tmpname, argv[1]) < 0) fail("rename to", argv[1], errno);
	return 0;
}
