#include "mp.h"
#include <stdio.h>
#include <string.h>

static uint64_t be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++) v = (v << 8) | p[i];
	return v;
}

static size_t left(const struct mp_in *r) { return (size_t)(r->end - r->p); }

/* Reads a header whose payload length is encoded after the tag: returns the number of bytes
 * of header (tag included) and stores the length, or 0 if the tag is not of this family. */
static int len_header(const struct mp_in *r, uint8_t fix_lo, uint8_t fix_hi, uint8_t fix_mask,
	uint8_t t8, uint8_t t16, uint8_t t32, uint32_t *n)
{
	if (left(r) < 1) return 0;
	uint8_t t = r->p[0];
	if (fix_hi && t >= fix_lo && t <= fix_hi) { *n = t & fix_mask; return 1; }
	if (t8 && t == t8) { if (left(r) < 2) return 0; *n = r->p[1]; return 2; }
	if (t == t16) { if (left(r) < 3) return 0; *n = (uint32_t)be(r->p + 1, 2); return 3; }
	if (t == t32) { if (left(r) < 5) return 0; *n = (uint32_t)be(r->p + 1, 4); return 5; }
	return 0;
}

int mp_nil(struct mp_in *r)
{
	if (left(r) < 1 || r->p[0] != 0xc0) return -1;
	r->p++;
	return 0;
}

int mp_bool(struct mp_in *r, int *v)
{
	if (left(r) < 1 || (r->p[0] != 0xc2 && r->p[0] != 0xc3)) return -1;
	*v = r->p[0] == 0xc3;
	r->p++;
	return 0;
}

/* Reads any number as either an unsigned magnitude or a negative value. */
static int number(struct mp_in *r, int *neg, uint64_t *mag)
{
	if (left(r) < 1) return -1;
	uint8_t t = r->p[0];
	size_t need = 1;
	*neg = 0;
	if (t <= 0x7f) { *mag = t; }
	else if (t >= 0xe0) { *neg = 1; *mag = (uint64_t)(-(int64_t)(int8_t)t); }
	else if (t >= 0xcc && t <= 0xcf) {
		int n = 1 << (t - 0xcc);
		need = 1 + (size_t)n;
		if (left(r) < need) return -1;
		*mag = be(r->p + 1, n);
	} else if (t >= 0xd0 && t <= 0xd3) {
		int n = 1 << (t - 0xd0);
		need = 1 + (size_t)n;
		if (left(r) < need) return -1;
		uint64_t raw = be(r->p + 1, n);
		int64_t v;
		if (n == 1) v = (int8_t)raw;
		else if (n == 2) v = (int16_t)raw;
		else if (n == 4) v = (int32_t)raw;
		else v = (int64_t)raw;
		if (v < 0) { *neg = 1; *mag = (uint64_t)0 - (uint64_t)v; } else *mag = (uint64_t)v;
	} else if (t == 0xca || t == 0xcb) {
		need = t == 0xca ? 5 : 9;
		if (left(r) < need) return -1;
		double d;
		if (t == 0xca) { uint32_t u = (uint32_t)be(r->p + 1, 4); float f; memcpy(&f, &u, 4); d = f; }
		else { uint64_t u = be(r->p + 1, 8); memcpy(&d, &u, 8); }
		/* Only integral values in the 53-bit range: anything else is not a count or an id. */
		if (!(d > -9007199254740992.0 && d < 9007199254740992.0) || d != (double)(int64_t)d) return -1;
		if (d < 0) { *neg = 1; *mag = (uint64_t)(-(int64_t)d); } else *mag = (uint64_t)d;
	} else return -1;
	r->p += need;
	return 0;
}

int mp_u64(struct mp_in *r, uint64_t *v)
{
	struct mp_in save = *r;
	int neg;
	uint64_t mag;
	if (number(r, &neg, &mag) < 0) return -1;
	if (neg && mag != 0) { *r = save; return -1; }
	*v = mag;
	return 0;
}

int mp_i64(struct mp_in *r, int64_t *v)
{
	struct mp_in save = *r;
	int neg;
	uint64_t mag;
	if (number(r, &neg, &mag) < 0) return -1;
	if (mag > (uint64_t)INT64_MAX) { *r = save; return -1; }
	*v = neg ? -(int64_t)mag : (int64_t)mag;
	return 0;
}

int mp_str(struct mp_in *r, const char **s, uint32_t *n)
{
	int h = len_header(r, 0xa0, 0xbf, 0x1f, 0xd9, 0xda, 0xdb, n);
	if (!h || left(r) - (size_t)h < *n) return -1;
	*s = (const char *)r->p + h;
	r->p += (size_t)h + *n;
	return 0;
}

int mp_bin(struct mp_in *r, const uint8_t **b, uint32_t *n)
{
	int h = len_header(r, 0, 0, 0, 0xc4, 0xc5, 0xc6, n);
	if (!h) {
		const char *s;
		if (mp_str(r, &s, n) < 0) return -1;
		*b = (const uint8_t *)s;
		return 0;
	}
	if (left(r) - (size_t)h < *n) return -1;
	*b = r->p + h;
	r->p += (size_t)h + *n;
	return 0;
}

int mp_array(struct mp_in *r, uint32_t *n)
{
	int h = len_header(r, 0x90, 0x9f, 0x0f, 0, 0xdc, 0xdd, n);
	if (!h) return -1;
	r->p += h;
	return 0;
}

int mp_map(struct mp_in *r, uint32_t *n)
{
	int h = len_header(r, 0x80, 0x8f, 0x0f, 0, 0xde, 0xdf, n);
	if (!h) return -1;
	r->p += h;
	return 0;
}

int mp_skip(struct mp_in *r)
{
	struct mp_in c = *r;
	uint64_t pending = 1;
	while (pending > 0) {
		if (left(&c) < 1) return -1;
		/* Every value takes at least one byte, so more pending values than bytes is a lie. */
		if (pending > left(&c)) return -1;
		pending--;
		uint8_t t = c.p[0];
		uint32_t n;
		const char *s;
		const uint8_t *b;
		int neg;
		uint64_t mag;
		if (t == 0xc0 || t == 0xc2 || t == 0xc3) { c.p++; continue; }
		if (mp_str(&c, &s, &n) == 0 || mp_bin(&c, &b, &n) == 0) continue;
		if (mp_array(&c, &n) == 0) { pending += n; continue; }
		if (mp_map(&c, &n) == 0) { pending += 2 * (uint64_t)n; continue; }
		if (number(&c, &neg, &mag) == 0) continue;
		/* Floats that are not integral, and extensions: skip by their fixed sizes. */
		size_t sz = 0;
		switch (t) {
		case 0xca: sz = 5; break;
		case 0xcb: sz = 9; break;
		case 0xd4: sz = 3; break;
		case 0xd5: sz = 4; break;
		case 0xd6: sz = 6; break;
		case 0xd7: sz = 10; break;
		case 0xd8: sz = 18; break;
		case 0xc7: if (left(&c) >= 2) sz = 3 + (size_t)c.p[1]; break;
		case 0xc8: if (left(&c) >= 3) sz = 4 + (size_t)be(c.p + 1, 2); break;
		case 0xc9: if (left(&c) >= 5) sz = 6 + (size_t)be(c.p + 1, 4); break;
		default: return -1;
		}
		if (sz == 0 || left(&c) < sz) return -1;
		c.p += sz;
	}
	*r = c;
	return 0;
}

static void put_be(struct buf *b, uint8_t tag, uint64_t v, int n)
{
	uint8_t tmp[9];
	tmp[0] = tag;
	for (int i = 0; i < n; i++) tmp[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	buf_put(b, tmp, 1 + (size_t)n);
}

static void len_tag(struct buf *b, size_t n, uint8_t fix, uint32_t fixmax, uint8_t t8, uint8_t t16, uint8_t t32)
{
	if (fix && n <= fixmax) { uint8_t t = (uint8_t)(fix | n); buf_put(b, &t, 1); }
	else if (t8 && n <= 0xff) put_be(b, t8, n, 1);
	else if (n <= 0xffff) put_be(b, t16, n, 2);
	else put_be(b, t32, n, 4);
}

void mp_w_map(struct buf *b, uint32_t n) { len_tag(b, n, 0x80, 15, 0, 0xde, 0xdf); }
void mp_w_array(struct buf *b, uint32_t n) { len_tag(b, n, 0x90, 15, 0, 0xdc, 0xdd); }
void mp_w_str(struct buf *b, const char *s, size_t n) { len_tag(b, n, 0xa0, 31, 0xd9, 0xda, 0xdb); buf_put(b, s, n); }
void mp_w_cstr(struct buf *b, const char *s) { mp_w_str(b, s, strlen(s)); }
void mp_w_bin_header(struct buf *b, size_t n) { len_tag(b, n, 0, 0, 0xc4, 0xc5, 0xc6); }
void mp_w_bin(struct buf *b, const void *p, size_t n) { mp_w_bin_header(b, n); buf_put(b, p, n); }

/* The length of the UTF-8 sequence at s[i], or 0 when none valid starts there (overlong forms,
 * surrogates and code points past U+10FFFF are not UTF-8). */
static size_t utf8_seq(const uint8_t *s, size_t i, size_t n)
{
	uint8_t c = s[i];
	if (c < 0x80) return 1;
	size_t len;
	uint32_t cp, min;
	if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; min = 0x80; }
	else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; min = 0x800; }
	else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; min = 0x10000; }
	else return 0;
	if (n - i < len) return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[i + k] & 0xc0) != 0x80) return 0;
		cp = (cp << 6) | (s[i + k] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
	return len;
}

int utf8_valid(const uint8_t *s, size_t n)
{
	for (size_t i = 0, len; i < n; i += len)
		if (!(len = utf8_seq(s, i, n))) return 0;
	return 1;
}

void mp_w_text(struct buf *b, const char *text, size_t n)
{
	const uint8_t *s = (const uint8_t *)text;
	if (utf8_valid(s, n)) { mp_w_str(b, text, n); return; }
	char shown[4 * 1024];
	size_t o = 0;
	for (size_t i = 0, len; i < n && o + 4 < sizeof shown; i += len) {
		if ((len = utf8_seq(s, i, n))) {
			if (o + len > sizeof shown) break;
			memcpy(shown + o, s + i, len);
			o += len;
		} else {
			snprintf(shown + o, 5, "\\x%02x", s[i]);
			o += 4;
			len = 1;
		}
	}
	mp_w_str(b, shown, o);
}

void mp_w_name(struct buf *b, const char *s, size_t n)
{
	if (utf8_valid((const uint8_t *)s, n)) mp_w_str(b, s, n);
	else mp_w_bin(b, s, n);
}

void mp_w_nil(struct buf *b) { uint8_t t = 0xc0; buf_put(b, &t, 1); }
void mp_w_bool(struct buf *b, int v) { uint8_t t = v ? 0xc3 : 0xc2; buf_put(b, &t, 1); }

void mp_w_u64(struct buf *b, uint64_t v)
{
	if (v <= 0x7f) { uint8_t t = (uint8_t)v; buf_put(b, &t, 1); }
	else if (v <= 0xff) put_be(b, 0xcc, v, 1);
	else if (v <= 0xffff) put_be(b, 0xcd, v, 2);
	else if (v <= 0xffffffffu) put_be(b, 0xce, v, 4);
	else put_be(b, 0xcf, v, 8);
}

void mp_w_i64(struct buf *b, int64_t v)
{
	if (v >= 0) { mp_w_u64(b, (uint64_t)v); return; }
	if (v >= -32) { uint8_t t = (uint8_t)(int8_t)v; buf_put(b, &t, 1); }
	else if (v >= INT8_MIN) put_be(b, 0xd0, (uint8_t)(int8_t)v, 1);
	else if (v >= INT16_MIN) put_be(b, 0xd1, (uint16_t)(int16_t)v, 2);
	else if (v >= INT32_MIN) put_be(b, 0xd2, (uint32_t)(int32_t)v, 4);
	else put_be(b, 0xd3, (uint64_t)v, 8);
}
