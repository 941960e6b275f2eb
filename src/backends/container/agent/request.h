/* Decoding a request frame's msgpack body into a struct req (request.c). */
#ifndef WARREN_REQUEST_H
#define WARREN_REQUEST_H
#include <stddef.h>
#include <stdint.h>
#include "agent.h"

/* True when the n bytes at k are the string lit. */
int key_is(const char *k, uint32_t n, const char *lit);

/* Parses a request body into q. Returns NULL, or what is wrong (q->id is set if it was read). */
const char *parse_req(struct mp_in *r, struct req *q, char *why, size_t whylen);

#endif
