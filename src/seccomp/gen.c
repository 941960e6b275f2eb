/* seccomp-gen: turns one of warren's seccomp policies (policy.h) into classic BPF, at build time.
 *
 *   seccomp-gen header sandbox OUT.h   a C header with one program per supported architecture,
 *                                      for the static container agent (../backends/container/agent/seccomp.c)
 *   seccomp-gen bpf js OUT.bpf         the raw program for the build host's architecture, which
 *                                      `bwrap --seccomp FD` loads (../backends/function/js/jail.ts)
 *
 * Runs on the build host, linked against libseccomp: libseccomp knows each architecture's
 * syscall numbers and writes a filter for any of them (seccomp_arch_add/remove), so what loads
 * the filter needs neither libseccomp nor kernel headers. Each program checks the architecture
 * first; another ABI on the same CPU (i386, x32 on x86_64; arm32 on aarch64) gets the policy's
 * `foreign_abi`. Instructions are written little-endian, as every target is. */
#define _GNU_SOURCE
#include <errno.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "policy.h"

struct target { const char *name; uint32_t arch; const char *cpp; };
/* The architectures a header carries a program for. */
static const struct target targets[] = {
	{ "x86_64", SCMP_ARCH_X86_64, "__x86_64__" },
	{ "aarch64", SCMP_ARCH_AARCH64, "__aarch64__" },
};
#define NTARGETS (sizeof targets / sizeof targets[0])

static const struct policy *const policies[] = { &sandbox_policy, &js_policy };
#define NPOLICIES (sizeof policies / sizeof policies[0])

static void __attribute__((noreturn)) fail(const char *what, const char *name, int rc)
{
	fprintf(stderr, "seccomp-gen: %s %s: %s\n", what, name ? name : "", strerror(rc < 0 ? -rc : rc));
	exit(1);
}

/* The number to give seccomp_rule_add (the build host's, or libseccomp's pseudo number), or
 * -1 when the target has no such call. A name neither a header target nor this one knows stops
 * the build. */
static int number_on(const struct target *t, const char *name)
{
	int known = seccomp_syscall_resolve_name_arch(t->arch, name) >= 0;
	for (size_t i = 0; i < NTARGETS; i++)
		if (seccomp_syscall_resolve_name_arch(targets[i].arch, name) >= 0) known = 1;
	if (!known) fail("no architecture has a syscall named", name, EINVAL);
	if (seccomp_syscall_resolve_name_arch(t->arch, name) < 0) return -1;
	return seccomp_syscall_resolve_name(name);
}

/* What one filter is being built: the context, its target and its policy. */
struct build { scmp_filter_ctx ctx; const struct target *t; const struct policy *p; };

static void add(const struct build *b, uint32_t action, const char *name, unsigned n, const struct scmp_arg_cmp *cmp)
{
	int nr = number_on(b->t, name);
	/* The default's action is not a rule libseccomp takes: such a name documents, and is checked. */
	if (nr == -1 || action == SCMP_ACT_ERRNO((uint32_t)b->p->default_errno)) return;
	int rc = seccomp_rule_add_array(b->ctx, action, nr, n, cmp);
	if (rc < 0) fail("rule for", name, rc);
}

static void add_list(const struct build *b, uint32_t action, const char *const *names)
{
	for (const char *const *p = names; *p; p++) add(b, action, *p, 0, NULL);
}

static void add_conditional(const struct build *b, const struct policy_cond *c)
{
	uint32_t refuse = SCMP_ACT_ERRNO((uint32_t)c->refuse);
	if (c->test == NONE_OF_BITS) {
		struct scmp_arg_cmp none = SCMP_A0(SCMP_CMP_MASKED_EQ, c->bits, 0);
		add(b, SCMP_ACT_ALLOW, c->name, 1, &none);
		/* Refused when any one of the bits is set: one rule per bit (rules of a call are or-ed). */
		for (int bit = 0; bit < 64; bit++) {
			uint64_t one = 1ULL << bit;
			if (!(c->bits & one)) continue;
			struct scmp_arg_cmp has = SCMP_A0(SCMP_CMP_MASKED_EQ, one, one);
			add(b, refuse, c->name, 1, &has);
		}
		return;
	}
	uint64_t max = 0;
	for (int i = 0; i < c->nvalues; i++) {
		struct scmp_arg_cmp is = SCMP_A0(SCMP_CMP_EQ, c->values[i]);
		add(b, SCMP_ACT_ALLOW, c->name, 1, &is);
		if (c->values[i] > max) max = c->values[i];
	}
	if (c->refuse == b->p->default_errno) return; /* the default already */
	/* libseccomp takes one comparison per argument and rule, and a rule without one would
	 * override the values allowed: "none of these" is spelt as "above the largest" plus each
	 * value in the gaps, so only small value sets (socket families) may have their own errno. */
	if (max >= 64) fail("ONE_OF_VALUES with its own errno needs values below 64:", c->name, EINVAL);
	struct scmp_arg_cmp above = SCMP_A0(SCMP_CMP_GT, max);
	add(b, refuse, c->name, 1, &above);
	for (uint64_t v = 0; v < max; v++) {
		int allowed = 0;
		for (int i = 0; i < c->nvalues; i++) if (c->values[i] == v) allowed = 1;
		if (allowed) continue;
		struct scmp_arg_cmp is = SCMP_A0(SCMP_CMP_EQ, v);
		add(b, refuse, c->name, 1, &is);
	}
}

/* The filter of one policy for one target as BPF instructions; returns their count, *out malloc'ed. */
static size_t generate(const struct policy *p, const struct target *t, uint8_t **out)
{
	struct build b = { seccomp_init(SCMP_ACT_ERRNO((uint32_t)p->default_errno)), t, p };
	if (!b.ctx) fail("seccomp_init", NULL, ENOMEM);
	int rc;
	if (seccomp_arch_exist(b.ctx, t->arch) != 0 && (rc = seccomp_arch_add(b.ctx, t->arch)) < 0) fail("add architecture", t->name, rc);
	if (seccomp_arch_native() != t->arch && (rc = seccomp_arch_remove(b.ctx, SCMP_ARCH_NATIVE)) < 0) fail("remove the build host's architecture for", t->name, rc);
	uint32_t badarch = p->foreign_abi == FOREIGN_ABI_KILL ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO((uint32_t)p->foreign_abi);
	if ((rc = seccomp_attr_set(b.ctx, SCMP_FLTATR_ACT_BADARCH, badarch)) < 0) fail("bad-architecture action", NULL, rc);
	/* A binary search over syscall numbers rather than a chain: ~9 comparisons per call, not one
	 * per named call (~300 for sandbox commands, ~110 for js). */
	if ((rc = seccomp_attr_set(b.ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0) fail("optimize", NULL, rc);
	add_list(&b, SCMP_ACT_ALLOW, p->allowed);
	add_list(&b, SCMP_ACT_ERRNO(EPERM), p->refused_eperm);
	add_list(&b, SCMP_ACT_ERRNO(ENOSYS), p->refused_enosys);
	for (int i = 0; i < p->nconditional; i++) add_conditional(&b, &p->conditional[i]);

	FILE *tmp = tmpfile();
	if (!tmp) fail("tmpfile", NULL, errno);
	if ((rc = seccomp_export_bpf(b.ctx, fileno(tmp))) < 0) fail("export the filter for", t->name, rc);
	seccomp_release(b.ctx);
	long len = lseek(fileno(tmp), 0, SEEK_END);
	if (len <= 0 || len % 8) fail("exported filter has a bad length for", t->name, EINVAL);
	*out = malloc((size_t)len);
	if (!*out || pread(fileno(tmp), *out, (size_t)len, 0) != len) fail("read back the filter for", t->name, EIO);
	fclose(tmp);
	size_t n = (size_t)len / 8;
	if (n > 4096) fail("filter longer than the kernel's 4096 instructions for", t->name, E2BIG);
	return n;
}

/* The agent's header: one program per target, chosen by the compiler's architecture macro. */
static void write_header(FILE *f, const struct policy *p)
{
	fprintf(f, "/* Generated by seccomp-gen from the %s policy (src/seccomp/) at build time: do not edit. */\n", p->name);
	for (size_t i = 0; i < NTARGETS; i++) {
		uint8_t *insns;
		size_t n = generate(p, &targets[i], &insns);
		fprintf(f, "#%s defined(%s)\n", i == 0 ? "if" : "elif", targets[i].cpp);
		fprintf(f, "#define WARREN_SECCOMP_TARGET \"%s\"\n", targets[i].name);
		fprintf(f, "static const struct filter_insn seccomp_policy[%zu] = {\n", n);
		for (size_t k = 0; k < n; k++) {
			const uint8_t *q = insns + 8 * k; /* struct sock_filter: u16 code, u8 jt, u8 jf, u32 k */
			fprintf(f, "\t{ 0x%04x, %u, %u, 0x%08x },\n", q[0] | q[1] << 8, q[2], q[3],
				(uint32_t)q[4] | (uint32_t)q[5] << 8 | (uint32_t)q[6] << 16 | (uint32_t)q[7] << 24);
		}
		fprintf(f, "};\n");
		free(insns);
	}
	/* Fail closed at compile time too: an agent for another architecture is not built without a filter. */
	fprintf(f, "#else\n#error \"no seccomp policy for this architecture: add it to src/seccomp/gen.c\"\n#endif\n");
}

/* bwrap's program: the build host's architecture only, as the kernel takes it (struct sock_filter[]). */
static void write_bpf(FILE *f, const struct policy *p)
{
	const struct target native = { "native", seccomp_arch_native(), NULL };
	uint8_t *insns;
	size_t n = generate(p, &native, &insns);
	if (fwrite(insns, 8, n, f) != n) fail("write the filter", NULL, EIO);
	free(insns);
}

int main(int argc, char **argv)
{
	const struct policy *p = NULL;
	for (size_t i = 0; argc == 4 && i < NPOLICIES; i++)
		if (strcmp(argv[2], policies[i]->name) == 0) p = policies[i];
	int header = argc == 4 && strcmp(argv[1], "header") == 0;
	if (!p || (!header && strcmp(argv[1], "bpf") != 0)) {
		fprintf(stderr, "usage: seccomp-gen header|bpf sandbox|js OUT\n");
		return 2;
	}
	/* Written beside, then renamed: a reader never sees half a filter. */
	char tmpname[4096];
	snprintf(tmpname, sizeof tmpname, "%s.tmp", argv[3]);
	FILE *f = fopen(tmpname, "w");
	if (!f) fail("create", tmpname, errno);
	if (header) write_header(f, p);
	else write_bpf(f, p);
	if (fclose(f) != 0) fail("write", tmpname, errno);
	if (rename(tmpname, argv[3]) < 0) fail("rename to", argv[3], errno);
	return 0;
}
