/* Resumable commands: an exec started with `retain` belongs to the agent, not to the
 * connection that started it. When that connection goes (the node agent crashed or is being
 * upgraded) the command runs on; its out frames are kept, encoded, until the host acknowledges
 * them (`ack`), so frames a dead host had received but not passed on are sent again to the next
 * one (`attach` from the seq it asks). What is kept is bounded: credit still holds, and past
 * WARREN_RETAIN_MAX_BYTES unacknowledged the agent stops reading the command's pipes (it blocks
 * on write, nothing is dropped). The memory is the agent's, inside the sandbox's cgroup: it
 * counts against the sandbox's own limits. An ended command's exit waits for an ack past its
 * seq, or WARREN_RETAIN_EXIT_MS with nobody attached. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "agent.h"
#include "exec.h"

struct rframe *retain_out(struct exec *e, int stream, const uint8_t *data, size_t n)
{
	/* The frame's head (length, map, keys, the bin's header) is small: made apart, so the data
	 * is copied once, into the kept frame. */
	struct buf h = { 0 };
	static const uint8_t zero[4];
	buf_put(&h, zero, 4);
	mp_w_map(&h, 5);
	mp_w_cstr(&h, "t"); mp_w_cstr(&h, "out");
	mp_w_cstr(&h, "id"); mp_w_u64(&h, e->id);
	mp_w_cstr(&h, "seq"); mp_w_u64(&h, e->seq);
	mp_w_cstr(&h, "fd"); mp_w_u64(&h, (uint64_t)stream);
	mp_w_cstr(&h, "data"); mp_w_bin_header(&h, n);
	size_t hl = buf_len(&h);
	struct rframe *f = h.oom ? NULL : malloc(sizeof *f + hl + n);
	/* Out of memory in the sandbox's cgroup: the frame's seq is spent, so a host sees the gap
	 * as a protocol violation rather than silently shifted output. */
	e->seq++;
	if (!f) { buf_free(&h); return NULL; }
	memcpy(f->bytes, buf_head(&h), hl);
	buf_free(&h);
	memcpy(f->bytes + hl, data, n);
	size_t len = hl + n - 4;
	f->bytes[0] = (uint8_t)(len >> 24); f->bytes[1] = (uint8_t)(len >> 16); f->bytes[2] = (uint8_t)(len >> 8); f->bytes[3] = (uint8_t)len;
	f->next = NULL;
	f->seq = e->seq - 1;
	f->len = hl + n;
	f->data_n = n;
	if (e->rtail) e->rtail->next = f;
	else e->rhead = f;
	e->rtail = f;
	e->rbytes += n;
	return f;
}

void retain_drop(struct exec *e, uint64_t seq)
{
	while (e->rhead && e->rhead->seq < seq) {
		struct rframe *f = e->rhead;
		e->rhead = f->next;
		e->rbytes -= f->data_n;
		free(f);
	}
	if (!e->rhead) { e->rtail = NULL; e->rbytes = 0; }
	if (seq > e->acked) e->acked = seq > e->seq ? e->seq : seq;
}

int retain_full(const struct exec *e)
{
	return e->rbytes >= WARREN_RETAIN_MAX_BYTES;
}

struct exec *retain_find(uint64_t id)
{
	for (int i = 0; i < nexecs; i++)
		if (execs[i]->retain && execs[i]->id == id && !execs[i]->done) return execs[i];
	return NULL;
}

int retain_expired(const struct exec *e, int64_t now)
{
	return !e->conn && now - e->ended_ms >= WARREN_RETAIN_EXIT_MS;
}

void exec_list(struct conn *c, const struct req *q)
{
	int n = 0;
	for (int i = 0; i < nexecs; i++) if (execs[i]->retain && !execs[i]->done && execs[i]->start == START_OK) n++;
	size_t m = frame_begin(c);
	struct buf *b = &c->out;
	mp_w_map(b, 3);
	mp_w_cstr(b, "t"); mp_w_cstr(b, "ok");
	mp_w_cstr(b, "id"); mp_w_u64(b, q->id);
	mp_w_cstr(b, "execs"); mp_w_array(b, (uint32_t)n);
	for (int i = 0; i < nexecs; i++) {
		const struct exec *e = execs[i];
		if (!e->retain || e->done || e->start != START_OK) continue;
		mp_w_map(b, 7);
		mp_w_cstr(b, "id"); mp_w_u64(b, e->id);
		mp_w_cstr(b, "tag"); mp_w_cstr(b, e->tag);
		mp_w_cstr(b, "pid"); mp_w_u64(b, (uint64_t)e->pid);
		mp_w_cstr(b, "seq"); mp_w_u64(b, e->seq);
		mp_w_cstr(b, "acked"); mp_w_u64(b, e->acked);
		mp_w_cstr(b, "ended"); mp_w_bool(b, e->ended || e->reaped);
		mp_w_cstr(b, "attached"); mp_w_bool(b, e->conn != NULL);
	}
	frame_end(c, m);
}

void exec_attach(struct conn *c, const struct req *q)
{
	struct exec *e = retain_find(q->id);
	if (!e || e->start != START_OK) { send_err(c, q->id, ERR_NOT_FOUND, "no resumable exec %llu", (unsigned long long)q->id); return; }
	uint64_t from = q->has_seq ? q->seq : e->acked;
	if (from > e->seq) { send_err_field(c, q->id, ERR_INVALID, "seq", "exec %llu has sent %llu frames, not %llu", (unsigned long long)q->id, (unsigned long long)e->seq, (unsigned long long)from); return; }
	if (from < e->acked) { send_err_field(c, q->id, ERR_RESUME_GAP, "seq", "exec %llu keeps frames from %llu, not %llu", (unsigned long long)q->id, (unsigned long long)e->acked, (unsigned long long)from); return; }
	/* The newest host wins: a connection still bound to it hears nothing more of it. */
	e->conn = c;
	retain_drop(e, from);
	e->started_sent = 1;
	size_t m = frame_begin(c);
	mp_w_map(&c->out, 3);
	mp_w_cstr(&c->out, "t"); mp_w_cstr(&c->out, "started");
	mp_w_cstr(&c->out, "id"); mp_w_u64(&c->out, e->id);
	mp_w_cstr(&c->out, "pid"); mp_w_u64(&c->out, (uint64_t)e->pid);
	frame_end(c, m);
	uint64_t resent = 0;
	for (struct rframe *f = e->rhead; f; f = f->next) { buf_put(&c->out, f->bytes, f->len); resent += f->data_n; }
	/* The new host's window: what it was sent again already used some of it. */
	if (e->credited && q->has_window) e->credit = q->window > resent ? q->window - resent : 0;
	if (e->ended) exec_send_exit(e);
	else if (e->reaped) exec_finish(e); /* it was waiting for credit to send the rest */
}

void exec_ack(struct conn *c, const struct req *q)
{
	struct exec *e = retain_find(q->id);
	/* No reply: an ack for an exec that is gone, or that another host took, changes nothing. */
	if (!e || e->conn != c || !q->has_seq) return;
	retain_drop(e, q->seq);
	/* An ack past the exit's seq: the host has the end too; the record is released. */
	if (e->ended && q->seq > e->seq) e->done = 1;
}
