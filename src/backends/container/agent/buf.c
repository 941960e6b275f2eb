#include "buf.h"
#include <stdlib.h>
#include <string.h>

int buf_reserve(struct buf *b, size_t n)
{
	if (b->oom) return -1;
	if (b->cap - b->end >= n) return 0;
	size_t len = buf_len(b);
	/* Reuse the consumed front before growing. */
	if (b->start > 0 && b->cap - len >= n) {
		memmove(b->data, b->data + b->start, len);
		b->start = 0;
		b->end = len;
		return 0;
	}
	size_t want = b->cap ? b->cap : 256;
	while (want - len < n) {
		if (want > ((size_t)1 << 40)) { b->oom = 1; return -1; }
		want *= 2;
	}
	uint8_t *p = malloc(want);
	if (!p) { b->oom = 1; return -1; }
	if (len) memcpy(p, b->data + b->start, len);
	free(b->data);
	b->data = p;
	b->start = 0;
	b->end = len;
	b->cap = want;
	return 0;
}

void buf_put(struct buf *b, const void *p, size_t n)
{
	if (n == 0 || buf_reserve(b, n) < 0) return;
	memcpy(b->data + b->end, p, n);
	b->end += n;
}

void buf_consume(struct buf *b, size_t n)
{
	b->start += n;
	if (b->start >= b->end) b->start = b->end = 0;
}

void buf_trim(struct buf *b)
{
	if (buf_len(b) == 0 && b->cap > 64 * 1024) buf_free(b);
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->start = b->end = b->cap = 0;
}
