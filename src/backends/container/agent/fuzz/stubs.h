/* What fuzz_request links in place of the agent's actions: see stubs.c. */
#ifndef WARREN_FUZZ_STUBS_H
#define WARREN_FUZZ_STUBS_H
#include <stddef.h>
#include <stdint.h>

/* The bytes received so far: every field handed to an action must point inside them. */
void stub_received(const uint8_t *base, size_t len);

#endif
