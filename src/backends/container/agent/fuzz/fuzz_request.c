/* libFuzzer target: the agent's request path, from bytes read off a connection to the action.
 *
 * The input is what the node writes to the agent's socket, preceded by one byte that chooses how
 * the stream arrives: 0 = in one read, n = in reads of n bytes (frames split anywhere). It goes
 * through the agent's own code — handle_input (framing), parse_req (decoding), the dispatch, and
 * exec.c's whole argument handling (argv, env, cwd, uid, signal checks) — linked unchanged.
 * What would touch the host is replaced at link time, here and only here (see stubs.c):
 * fork() fails with EAGAIN, so an exec is answered NO_CAPACITY after its arguments were built;
 * the file operations are recording stubs that check their request and answer ok.
 *
 * What must hold, whatever the bytes:
 *   - no read or write outside the connection's buffers (AddressSanitizer), no undefined
 *     behaviour (UBSan), no leak (LeakSanitizer: every argv/env the exec path built is freed);
 *   - every field a request hands to an action lies inside the bytes received;
 *   - everything the agent writes back is a sequence of well-formed frames: a length, then
 *     exactly one msgpack map with a "t" of a known kind and an "id"; an err carries a code
 *     from protocol.h;
 *   - the agent answers at most once per frame (plus one err for a bad length), and after a bad
 *     length it reads nothing more from that connection. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../agent.h"
#include "stubs.h"

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_request: check failed: %s (line %d)\n", #cond, __LINE__); abort(); } } while (0)

static int key_is(const char *k, uint32_t n, const char *lit)
{
	return strlen(lit) == n && !memcmp(k, lit, n);
}

static int known_code(const char *s, uint32_t n)
{
	/* Every code of protocol.h. */
	static const char *const codes[] = { ERR_MALFORMED, ERR_TOO_LARGE, ERR_UNKNOWN_KIND, ERR_INVALID,
		ERR_NOT_FOUND, ERR_FORBIDDEN, ERR_NO_CAPACITY, ERR_OVERLOADED, ERR_UNSUPPORTED, ERR_UNAVAILABLE,
		ERR_INTERNAL, ERR_RESUME_GAP };
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) if (key_is(s, n, codes[i])) return 1;
	return 0;
}

/* Checks one reply body: a map with string keys, a known "t", an "id", a known code on err. */
static void check_reply(const uint8_t *p, size_t n)
{
	struct mp_in r = { p, p + n };
	struct mp_in whole = r;
	CHECK(mp_skip(&whole) == 0 && whole.p == whole.end);
	uint32_t pairs;
	CHECK(mp_map(&r, &pairs) == 0);
	int has_t = 0, has_id = 0, is_err = 0, has_code = 0;
	for (uint32_t i = 0; i < pairs; i++) {
		const char *k, *s;
		uint32_t kl, sl;
		uint64_t id;
		CHECK(mp_str(&r, &k, &kl) == 0);
		if (key_is(k, kl, "t")) {
			CHECK(mp_str(&r, &s, &sl) == 0);
			CHECK(key_is(s, sl, "ok") || key_is(s, sl, "err") || key_is(s, sl, "started") || key_is(s, sl, "out") || key_is(s, sl, "taken") || key_is(s, sl, "exit"));
			is_err = key_is(s, sl, "err");
			has_t = 1;
		} else if (key_is(k, kl, "id")) {
			CHECK(mp_u64(&r, &id) == 0);
			has_id = 1;
		} else if (key_is(k, kl, "code")) {
			CHECK(mp_str(&r, &s, &sl) == 0 && known_code(s, sl));
			has_code = 1;
		} else CHECK(mp_skip(&r) == 0);
	}
	CHECK(has_t && has_id && (!is_err || has_code));
}

/* Takes every reply off the connection's output, as the event loop's flush would; returns how many. */
static unsigned drain_replies(struct conn *c)
{
	unsigned count = 0;
	CHECK(!c->out.oom);
	while (buf_len(&c->out) > 0) {
		CHECK(buf_len(&c->out) >= 4);
		const uint8_t *h = buf_head(&c->out);
		size_t n = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
		CHECK(n > 0 && n <= WARREN_MAX_FRAME_BYTES && buf_len(&c->out) >= 4 + n);
		check_reply(h + 4, n);
		buf_consume(&c->out, 4 + n);
		count++;
	}
	return count;
}

/* Frames in the stream (complete ones, up to and including a bad length): the most replies allowed. */
static unsigned frames_in(const uint8_t *p, size_t n, int *bad_length)
{
	unsigned count = 0;
	*bad_length = 0;
	while (n >= 4) {
		uint32_t len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
		if (len == 0 || len > WARREN_MAX_FRAME_BYTES) { *bad_length = 1; return count + 1; }
		if (n - 4 < len) break;
		count++;
		p += 4 + len;
		n -= 4 + len;
	}
	return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1) return 0;
	size_t chunk = data[0] ? data[0] : size;
	const uint8_t *stream = data + 1;
	size_t len = size - 1;

	struct conn c;
	memset(&c, 0, sizeof c);
	c.fd = -1;
	unsigned replies = 0;
	for (size_t at = 0; at < len && !c.dead && !c.closing; at += chunk) {
		size_t n = len - at < chunk ? len - at : chunk;
		/* As conn_read does: room at the end of the input buffer, the bytes, then the frames. */
		CHECK(buf_reserve(&c.in, n) == 0);
		memcpy(c.in.data + c.in.end, stream + at, n);
		c.in.end += n;
		stub_received(c.in.data, c.in.end);
		handle_input(&c);
		replies += drain_replies(&c);
	}
	int bad_length;
	unsigned frames = frames_in(stream, len, &bad_length);
	CHECK(replies <= frames);
	CHECK(c.closing == bad_length);
	CHECK(!c.dead);
	exec_conn_gone(&c);
	exec_sweep();
	buf_free(&c.in);
	buf_free(&c.out);
	return 0;
}
