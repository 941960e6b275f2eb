/* The msgpack subset the protocol needs: a bounds-checked cursor reader and a writer into a
 * struct buf. Readers return 0 on success and -1 when the next value is not of the asked type
 * or runs past the end; on -1 the cursor is left unchanged. */
#ifndef WARREN_MP_H
#define WARREN_MP_H
#include <stdint.h>
#include "buf.h"

struct mp_in {
	const uint8_t *p, *end;
};

int mp_nil(struct mp_in *r);
int mp_bool(struct mp_in *r, int *v);
/* Any msgpack integer, or a float holding an integer, that fits the type. */
int mp_u64(struct mp_in *r, uint64_t *v);
int mp_i64(struct mp_in *r, int64_t *v);
int mp_str(struct mp_in *r, const char **s, uint32_t *n);
/* A bin, or a str taken as bytes. */
int mp_bin(struct mp_in *r, const uint8_t **b, uint32_t *n);
int mp_array(struct mp_in *r, uint32_t *n);
int mp_map(struct mp_in *r, uint32_t *n);
/* Skips one value of any type (nested ones iteratively, never recursively). */
int mp_skip(struct mp_in *r);

void mp_w_map(struct buf *b, uint32_t n);
void mp_w_array(struct buf *b, uint32_t n);
void mp_w_str(struct buf *b, const char *s, size_t n);
void mp_w_cstr(struct buf *b, const char *s);
void mp_w_bin(struct buf *b, const void *p, size_t n);
/* True when the n bytes at s are UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF). */
int utf8_valid(const uint8_t *s, size_t n);
/* Text for people (a message): a str, each byte outside valid UTF-8 shown as \xHH (at most 4 KiB). */
void mp_w_text(struct buf *b, const char *s, size_t n);
/* A file name or path: a str when it is UTF-8, else a bin of its bytes (the protocol's rule). */
void mp_w_name(struct buf *b, const char *s, size_t n);
void mp_w_u64(struct buf *b, uint64_t v);
void mp_w_i64(struct buf *b, int64_t v);
void mp_w_bool(struct buf *b, int v);
void mp_w_nil(struct buf *b);
/* Writes the header of a bin of n bytes; the caller appends the bytes. */
void mp_w_bin_header(struct buf *b, size_t n);

#endif
