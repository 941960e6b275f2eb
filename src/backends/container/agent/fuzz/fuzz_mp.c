/* libFuzzer target: the agent's msgpack reader (mp.c) on arbitrary bytes, and its writer and
 * reader against each other.
 *
 * What must hold, whatever the bytes:
 *   - no reader reads outside [p, end) (AddressSanitizer sees the input as an exact-size block);
 *   - a reader that fails leaves the cursor where it was (mp.h promises it; parse_req relies on
 *     it to report the right field);
 *   - a reader that succeeds moves the cursor forward, and the value it returns (a string, a
 *     bin) lies inside what it consumed;
 *   - the readers agree with mp_skip: a scalar read successfully ends where skipping it ends;
 *   - mp_skip terminates, on any nesting, without recursion;
 *   - what the mp_w_* writers produce reads back as the same value (lengths on every boundary
 *     of the msgpack size classes included).
 * A violation aborts, which libFuzzer reports as a crash with the input that caused it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../mp.h"

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_mp: check failed: %s (line %d)\n", #cond, __LINE__); abort(); } } while (0)

static const uint8_t *lo, *hi;

/* A successful read moved the cursor forward and stayed inside the input. */
static void moved(const struct mp_in *before, const struct mp_in *after)
{
	CHECK(after->p > before->p && after->p <= hi && after->end == hi);
}

static void inside(const void *p, uint32_t n, const struct mp_in *after)
{
	const uint8_t *b = p;
	CHECK(b >= lo && b <= after->p && (size_t)(after->p - b) >= n);
}

/* Where mp_skip ends from c, or NULL if it refuses. */
static const uint8_t *skip_end(struct mp_in c)
{
	struct mp_in before = c;
	if (mp_skip(&c) < 0) { CHECK(c.p == before.p); return NULL; }
	moved(&before, &c);
	return c.p;
}

/* Every reader at one position, each on its own copy of the cursor. */
static void readers_at(const struct mp_in *at)
{
	const uint8_t *skipped = skip_end(*at);
	struct mp_in r;
	const char *s;
	const uint8_t *b;
	uint32_t n;
	uint64_t u;
	int64_t i;
	int v;

	r = *at;
	if (mp_nil(&r) == 0) { moved(at, &r); CHECK(r.p == skipped); } else CHECK(r.p == at->p);
	r = *at;
	if (mp_bool(&r, &v) == 0) { moved(at, &r); CHECK(v == 0 || v == 1); CHECK(r.p == skipped); } else CHECK(r.p == at->p);
	r = *at;
	if (mp_str(&r, &s, &n) == 0) { moved(at, &r); inside(s, n, &r); CHECK(r.p == skipped); } else CHECK(r.p == at->p);
	r = *at;
	if (mp_bin(&r, &b, &n) == 0) { moved(at, &r); inside(b, n, &r); CHECK(r.p == skipped); } else CHECK(r.p == at->p);
	r = *at;
	int have_u = mp_u64(&r, &u) == 0;
	if (have_u) { moved(at, &r); CHECK(r.p == skipped); } else CHECK(r.p == at->p);
	r = *at;
	int have_i = mp_i64(&r, &i) == 0;
	if (have_i) { moved(at, &r); CHECK(r.p == skipped); } else CHECK(r.p == at->p);
	/* One number, two views: they must agree where both can hold it. */
	if (have_u && u <= (uint64_t)INT64_MAX) CHECK(have_i && (uint64_t)i == u);
	if (have_i && i >= 0) CHECK(have_u && u == (uint64_t)i);
	r = *at;
	if (mp_array(&r, &n) == 0) { moved(at, &r); if (n == 0) CHECK(r.p == skipped); } else CHECK(r.p == at->p);
	r = *at;
	if (mp_map(&r, &n) == 0) { moved(at, &r); if (n == 0) CHECK(r.p == skipped); } else CHECK(r.p == at->p);
}

/* The writers against the readers: values taken from the input, written, read back. */
static void round_trip(const uint8_t *data, size_t size)
{
	/* Lengths around every size-class boundary of str, bin, array and map headers. */
	static const uint32_t lengths[] = { 0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536, 70000 };
	static uint8_t fill[70000];
	struct buf w = { 0 };
	size_t at = 0;
	int ops = 0, long_done = 0;
	while (at + 9 <= size && ops < 16) {
		uint8_t kind = data[at] % 7;
		uint64_t v;
		memcpy(&v, data + at + 1, 8);
		at += 9;
		ops++;
		uint32_t len = lengths[v % (sizeof lengths / sizeof lengths[0])];
		/* One long value per input is enough to cross the 32-bit size class; more only cost time. */
		if (len > 256 && long_done++) len = 256;
		struct buf one = { 0 };
		switch (kind) {
		case 0: mp_w_u64(&one, v); break;
		case 1: mp_w_i64(&one, (int64_t)v); break;
		case 2: mp_w_str(&one, (const char *)fill, len); break;
		case 3: mp_w_bin(&one, fill, len); break;
		case 4: mp_w_array(&one, (uint32_t)v); break;
		case 5: mp_w_map(&one, (uint32_t)v); break;
		default: mp_w_bool(&one, (int)(v & 1)); break;
		}
		CHECK(!one.oom);
		struct mp_in r = { buf_head(&one), buf_head(&one) + buf_len(&one) };
		uint64_t u;
		int64_t i;
		uint32_t n;
		const char *s;
		const uint8_t *b;
		int flag;
		switch (kind) {
		case 0: CHECK(mp_u64(&r, &u) == 0 && u == v); break;
		case 1: if ((int64_t)v == INT64_MIN) { CHECK(mp_skip(&r) == 0); break; } /* its magnitude is past INT64_MAX */
			CHECK(mp_i64(&r, &i) == 0 && i == (int64_t)v); break;
		case 2: CHECK(mp_str(&r, &s, &n) == 0 && n == len); break;
		case 3: CHECK(mp_bin(&r, &b, &n) == 0 && n == len); break;
		case 4: CHECK(mp_array(&r, &n) == 0 && n == (uint32_t)v); break;
		case 5: CHECK(mp_map(&r, &n) == 0 && n == (uint32_t)v); break;
		default: CHECK(mp_bool(&r, &flag) == 0 && flag == (int)(v & 1)); break;
		}
		CHECK(r.p == r.end);
		/* Scalars laid end to end must skip one by one, too. */
		if (kind != 4 && kind != 5) buf_put(&w, buf_head(&one), buf_len(&one));
		buf_free(&one);
	}
	/* Copied as file_list copies its entries into the reply, an empty buffer included (its head
	 * with length 0 must be fine to pass on), then skipped value by value. */
	struct buf copy = { 0 };
	buf_put(&copy, buf_head(&w), buf_len(&w));
	CHECK(buf_len(&copy) == buf_len(&w));
	if (buf_len(&copy) > 0) {
		struct mp_in r = { buf_head(&copy), buf_head(&copy) + buf_len(&copy) };
		while (r.p < r.end) CHECK(mp_skip(&r) == 0);
	}
	buf_free(&copy);
	buf_free(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	lo = data;
	hi = data + size;
	/* Every reader at every offset (of the first 1 KiB: skipping is linear, so all of them would
	 * be quadratic): mutations anywhere land on some header. */
	for (size_t off = 0; off < size && off < 1024; off++) {
		struct mp_in at = { data + off, hi };
		readers_at(&at);
	}
	/* The input as a stream of values, as a frame body is read. */
	struct mp_in r = { data, hi };
	while (r.p < r.end && mp_skip(&r) == 0) {}
	CHECK(r.p <= r.end);
	round_trip(data, size);
	return 0;
}
