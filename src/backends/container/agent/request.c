/* Decoding a request: the frame body is one msgpack map; each known key is checked for its
 * type and stored in a struct req as a pointer into the frame (nothing is copied), unknown keys
 * are skipped, nil means absent. What is wrong is said by name, for the sender's error reply. */
#include <stdio.h>
#include <string.h>
#include "request.h"

int key_is(const char *k, uint32_t n, const char *lit)
{
	return strlen(lit) == n && !memcmp(k, lit, n);
}

static const char *get_str(struct mp_in *r, struct field *f)
{
	if (mp_str(r, &f->p, &f->n) < 0) return "expected a string";
	f->set = 1;
	return NULL;
}

static const char *get_bin(struct mp_in *r, struct field *f)
{
	const uint8_t *b;
	if (mp_bin(r, &b, &f->n) < 0) return "expected bytes";
	f->p = (const char *)b;
	f->set = 1;
	return NULL;
}

/* A path or name: a str, or a bin for one that is not UTF-8 (a file name is any bytes). */
static const char *get_name(struct mp_in *r, struct field *f)
{
	return get_bin(r, f) ? "expected a string or bytes" : NULL;
}

static const char *get_u64(struct mp_in *r, uint64_t *v, int *has)
{
	if (mp_u64(r, v) < 0) return "expected a non-negative integer";
	*has = 1;
	return NULL;
}

static const char *get_bool(struct mp_in *r, int *v)
{
	return mp_bool(r, v) < 0 ? "expected a boolean" : NULL;
}

/* argv: an array of 1..WARREN_MAX_ARGS strings without NUL bytes. */
static const char *get_argv(struct mp_in *r, struct req *q)
{
	q->argv = *r;
	uint32_t n;
	if (mp_array(r, &n) < 0) return "expected an array of strings";
	if (n == 0 || n > WARREN_MAX_ARGS) return "must have 1 to 4096 items";
	for (uint32_t i = 0; i < n; i++) {
		const char *s;
		uint32_t len;
		if (mp_str(r, &s, &len) < 0) return "expected an array of strings";
		if (memchr(s, 0, len)) return "contains a NUL byte";
	}
	q->has_argv = 1;
	return NULL;
}

/* env: a map of up to WARREN_MAX_ARGS string pairs without NUL bytes. */
static const char *get_env(struct mp_in *r, struct req *q)
{
	q->env = *r;
	uint32_t n;
	if (mp_map(r, &n) < 0) return "expected a map of strings";
	if (n > WARREN_MAX_ARGS) return "too many variables";
	for (uint32_t i = 0; i < 2 * n; i++) {
		const char *s;
		uint32_t len;
		if (mp_str(r, &s, &len) < 0) return "expected a map of strings";
		if (memchr(s, 0, len)) return "contains a NUL byte";
	}
	q->has_env = 1;
	return NULL;
}

/* Parses a request body into q. Returns NULL, or what is wrong (q->id is set if it was read). */
const char *parse_req(struct mp_in *r, struct req *q, char *why, size_t whylen)
{
	uint32_t n;
	if (mp_map(r, &n) < 0) return "the frame body is not a msgpack map";
	for (uint32_t i = 0; i < n; i++) {
		const char *k;
		uint32_t kl;
		if (mp_str(r, &k, &kl) < 0) return "a map key is not a string";
		/* nil stands for "absent" for every field. */
		if (mp_nil(r) == 0) continue;
		const char *bad = NULL;
		if (key_is(k, kl, "t")) bad = get_str(r, &q->t);
		else if (key_is(k, kl, "id")) bad = get_u64(r, &q->id, &q->has_id);
		else if (key_is(k, kl, "argv")) bad = get_argv(r, q);
		else if (key_is(k, kl, "env")) bad = get_env(r, q);
		else if (key_is(k, kl, "cwd")) bad = get_name(r, &q->cwd);
		else if (key_is(k, kl, "path")) bad = get_name(r, &q->path);
		else if (key_is(k, kl, "name")) bad = get_str(r, &q->name);
		else if (key_is(k, kl, "to")) bad = get_name(r, &q->to);
		else if (key_is(k, kl, "target")) bad = get_name(r, &q->target);
		else if (key_is(k, kl, "data")) bad = get_bin(r, &q->data);
		else if (key_is(k, kl, "stdin")) bad = get_bin(r, &q->in);
		else if (key_is(k, kl, "uid")) bad = get_u64(r, &q->uid, &q->has_uid);
		else if (key_is(k, kl, "gid")) bad = get_u64(r, &q->gid, &q->has_gid);
		else if (key_is(k, kl, "timeoutMs")) bad = get_u64(r, &q->timeout_ms, &q->has_timeout);
		else if (key_is(k, kl, "maxOutputBytes")) bad = get_u64(r, &q->max_output, &q->has_max_output);
		else if (key_is(k, kl, "window")) bad = get_u64(r, &q->window, &q->has_window);
		else if (key_is(k, kl, "bytes")) bad = get_u64(r, &q->bytes, &q->has_bytes);
		else if (key_is(k, kl, "cols")) bad = get_u64(r, &q->cols, &q->has_cols);
		else if (key_is(k, kl, "rows")) bad = get_u64(r, &q->rows, &q->has_rows);
		else if (key_is(k, kl, "pty")) bad = get_bool(r, &q->pty);
		else if (key_is(k, kl, "exec")) bad = get_u64(r, &q->exec, &q->has_exec);
		else if (key_is(k, kl, "offset")) bad = get_u64(r, &q->offset, &q->has_offset);
		else if (key_is(k, kl, "length")) bad = get_u64(r, &q->length, &q->has_length);
		else if (key_is(k, kl, "mode")) bad = get_u64(r, &q->mode, &q->has_mode);
		else if (key_is(k, kl, "signal")) { bad = mp_i64(r, &q->signal) < 0 ? "expected an integer" : NULL; q->has_signal = !bad; }
		else if (key_is(k, kl, "stdinStream")) bad = get_bool(r, &q->stdin_stream);
		else if (key_is(k, kl, "eof")) bad = get_bool(r, &q->eof);
		else if (key_is(k, kl, "append")) bad = get_bool(r, &q->append);
		else if (key_is(k, kl, "mkdirs")) bad = get_bool(r, &q->mkdirs);
		else if (key_is(k, kl, "recursive")) bad = get_bool(r, &q->recursive);
		else if (key_is(k, kl, "follow")) bad = get_bool(r, &q->follow);
		else if (key_is(k, kl, "parents")) bad = get_bool(r, &q->parents);
		else if (key_is(k, kl, "flatten")) bad = get_bool(r, &q->flatten);
		else if (key_is(k, kl, "seed")) bad = get_bin(r, &q->seed);
		else if (key_is(k, kl, "tag")) bad = get_str(r, &q->tag);
		else if (key_is(k, kl, "seq")) bad = get_u64(r, &q->seq, &q->has_seq);
		else if (key_is(k, kl, "retain")) bad = get_bool(r, &q->retain);
		else if (key_is(k, kl, "timeMs")) bad = get_u64(r, &q->time_ms, &q->has_time);
		else if (mp_skip(r) < 0) bad = "undecodable value";
		if (bad) {
			snprintf(why, whylen, "field \"%.*s\": %s", (int)(kl > 40 ? 40 : kl), k, bad);
			return why;
		}
	}
	if (r->p != r->end) return "bytes after the map";
	if (!q->t.set) return "field \"t\" (the kind) is missing";
	if (!q->has_id) return "field \"id\" is missing";
	return NULL;
}
