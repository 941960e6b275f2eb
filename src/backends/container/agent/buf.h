/* A growable byte queue: append at the end, consume from the front. Allocation failure sets
 * `oom` and turns further appends into no-ops, so callers check once per frame, not per byte. */
#ifndef WARREN_BUF_H
#define WARREN_BUF_H
#include <stddef.h>
#include <stdint.h>

struct buf {
	uint8_t *data;
	size_t start, end, cap;
	int oom;
};

static inline size_t buf_len(const struct buf *b) { return b->end - b->start; }
/* NULL for a queue that never held anything (NULL + 0 is undefined behaviour in C). */
static inline uint8_t *buf_head(const struct buf *b) { return b->data ? b->data + b->start : NULL; }

/* Makes room for n more bytes at the end; 0 on success, -1 (and oom set) on failure. */
int buf_reserve(struct buf *b, size_t n);
void buf_put(struct buf *b, const void *p, size_t n);
void buf_consume(struct buf *b, size_t n);
/* Frees the memory when the queue is empty and large, so idle connections stay small. */
void buf_trim(struct buf *b);
void buf_free(struct buf *b);

#endif
