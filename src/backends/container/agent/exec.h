/* The agent's table of commands, shared by exec.c (running them) and retain.c (keeping a
 * resumable command's output for a host that may go away and come back). Internal to those two. */
#ifndef WARREN_EXEC_H
#define WARREN_EXEC_H
#include <stdint.h>
#include <sys/types.h>
#include "agent.h"

enum start_state { START_PENDING, START_OK, START_FAILED };

/* One out frame of a resumable exec, kept encoded (length prefix included) until acknowledged. */
struct rframe {
	struct rframe *next;
	uint64_t seq;
	size_t len;
	size_t data_n; /* the output bytes in it */
	uint8_t bytes[];
};

struct exec {
	struct conn *conn; /* NULL once the connection went: output is then discarded (or retained) */
	uint64_t id;
	pid_t pid;
	int out_fd, err_fd, in_fd, status_fd;
	struct buf in_buf;
	int in_stream, in_eof;
	uint64_t seq, emitted, max_out;
	/* Output credit (protocol.h): with `credited`, out data stops at `credit` until more is granted. */
	int credited;
	uint64_t credit;
	size_t drained[2]; /* bytes read from stdout, stderr after the command ended */
	int64_t start_ms, deadline_ms;
	int truncated, timed_out, killed, reaped, done, wait_status;
	int pty; /* runs on a pseudo-terminal: out_fd is its master, in_fd a second descriptor of it */
	enum start_state start;
	int started_sent;
	int32_t fail_stage, fail_errno;
	char name[64]; /* argv[0], for messages */
	/* Resumable (`retain`): outlives its connection; out frames kept until acknowledged. */
	int retain;
	char tag[WARREN_MAX_TAG + 1];
	struct rframe *rhead, *rtail;
	size_t rbytes;     /* data bytes held in rhead.. */
	uint64_t acked;    /* frames below this seq were acknowledged (and freed) */
	int ended;         /* the command ended and its output was read: the exit record waits for an ack */
	int64_t ended_ms;
};

extern struct exec *execs[WARREN_MAX_EXECS];
extern int nexecs;

/* exec.c: reports what is left of an ended command and how it ended (again once credit comes). */
void exec_finish(struct exec *e);
/* exec.c: sends an exec's exit frame on its connection. */
void exec_send_exit(struct exec *e);
/* retain.c: keeps one out frame of a resumable exec; returns it (NULL when out of memory). */
struct rframe *retain_out(struct exec *e, int stream, const uint8_t *data, size_t n);
/* retain.c: frees the kept frames below seq. */
void retain_drop(struct exec *e, uint64_t seq);
/* retain.c: true when a resumable exec holds as much unacknowledged output as it may. */
int retain_full(const struct exec *e);
/* retain.c: a resumable exec with this id that has not been released, on any connection. */
struct exec *retain_find(uint64_t id);
/* retain.c: whether a detached exec's exit record has waited long enough to be released. */
int retain_expired(const struct exec *e, int64_t now);

#endif
