/* Shared declarations of the agent: connections, requests, replies, execs and file ops. */
#ifndef WARREN_AGENT_H
#define WARREN_AGENT_H
#include <stdint.h>
#include <sys/types.h>
#include "buf.h"
#include "mp.h"
#include "protocol.h"

/* A client connection: a socket accepted from the listener, or a stream device (VM port). */
struct conn {
	int fd;
	struct buf in, out;
	int dead;      /* close at the end of this loop turn */
	int closing;   /* flush out, then close (after a fatal framing error) */
};

/* A string or byte field of a request: points into the frame being handled. */
struct field {
	const char *p;
	uint32_t n;
	int set;
};

/* Every field any request may carry, parsed in one pass; `set` says which were present. */
struct req {
	struct field t, cwd, path, data, in, name, to, target, seed, tag;
	uint64_t id;
	int has_id;
	struct mp_in argv, env; /* positioned at the array/map header */
	int has_argv, has_env;
	uint64_t uid, gid, timeout_ms, max_output, exec, offset, length, mode, window, bytes, cols, rows, time_ms, seq;
	int has_uid, has_gid, has_timeout, has_max_output, has_exec, has_offset, has_length, has_mode, has_window, has_bytes, has_cols, has_rows, has_time, has_seq;
	int64_t signal;
	int has_signal;
	int stdin_stream, eof, append, mkdirs, recursive, follow, pty, parents, flatten, retain;
};

/* Frame construction: begin reserves the length prefix, end patches it. */
size_t frame_begin(struct conn *c);
void frame_end(struct conn *c, size_t mark);
void send_err(struct conn *c, uint64_t id, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* An err naming the request field that caused it ("cwd", "user"), for the client to pass on. */
void send_err_field(struct conn *c, uint64_t id, const char *code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void send_errno(struct conn *c, uint64_t id, int err, const char *what, const char *path);
void send_ok(struct conn *c, uint64_t id);
/* The error code an errno value stands for. */
const char *errno_code(int err);

/* Copies a path field into a NUL-terminated buffer; 0, or -1 after replying with an error. */
int take_path(struct conn *c, const struct req *q, char out[WARREN_MAX_PATH + 1]);
/* The same for another path-like field (rename's `to`, symlink's `target`), named in the error. */
int take_field_path(struct conn *c, const struct req *q, const struct field *f, const char *name, char out[WARREN_MAX_PATH + 1]);

/* Set by vm.c: the agent is a VM's PID 1, so the clock and the random pool are the sandbox's own. */
extern int agent_in_vm;

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t now_ms(void);

/* exec.c */
struct exec;
void exec_start(struct conn *c, const struct req *q);
/* `tree`: the archive of the VM's writable layer (or flattened tree), streamed as an exec's output. */
void exec_tree(struct conn *c, const struct req *q);
/* cgroup.procs of the group commands join before execve (VMs); -1: they stay in the agent's. */
extern int exec_cgroup_fd;
void exec_stdin(struct conn *c, const struct req *q);
void exec_kill(struct conn *c, const struct req *q);
void exec_credit(struct conn *c, const struct req *q);
void exec_resize(struct conn *c, const struct req *q);
/* Called when a connection goes: kills its running execs (resumable ones are detached) and forgets their owner. */
void exec_conn_gone(struct conn *c);
/* retain.c: `execs` lists the resumable execs; `attach` binds one to this connection and sends
 * again what it kept; `ack` frees what the host has taken for good. */
void exec_list(struct conn *c, const struct req *q);
void exec_attach(struct conn *c, const struct req *q);
void exec_ack(struct conn *c, const struct req *q);
/* Poll integration: adds exec fds to the set / handles their events / reaps children. */
struct pollfd;
int exec_poll_fds(struct pollfd *fds, void **owners, int max, int base);
/* The egress relay (relay.c): 127.0.0.1:RELAY_PORT inside → the node's proxy at EGRESS_SOCKET. */
#define EGRESS_DIR "/dev/warren-egress"
#define EGRESS_SOCKET EGRESS_DIR "/proxy.sock"
#define RELAY_PORT 3128
#define RELAY_MAX 64
int relay_start(void);
/* A VM's relay: over the virtio serial port at `port` instead of a socket bound in. */
int relay_start_vm(const char *port);
int relay_poll_fds(struct pollfd *fds, void **owners, int max, int base);
void relay_handle(void *owner, short revents, int fd);
void relay_sweep(void);
/* The poll timeout the relay needs (-1 for none): a VM's port waiting to be opened again. */
int relay_poll_timeout(void);
/* relay-mux.c: in a VM, the same relay over the virtio serial port at `port` (see there). */
int mux_start(const char *port);
int mux_poll_fds(struct pollfd *fds, void **owners, int max, int base);
void mux_handle(void *owner, short revents, int fd);
void mux_sweep(void);
int mux_poll_timeout(void);
void exec_handle(void *owner, short revents, int fd);
void exec_reap(void);
/* The nearest deadline of a running exec, as a poll timeout (-1 for none). */
int exec_poll_timeout(void);
void exec_check_timeouts(void);
void exec_sweep(void);

/* files.c */
void file_read(struct conn *c, const struct req *q);
void file_write(struct conn *c, const struct req *q);
void file_list(struct conn *c, const struct req *q);
void file_stat(struct conn *c, const struct req *q);
void file_remove(struct conn *c, const struct req *q);
void file_mkdir(struct conn *c, const struct req *q);
void file_rename(struct conn *c, const struct req *q);
void file_symlink(struct conn *c, const struct req *q);

/* agent.c: cuts the complete frames off the front of c->in and handles each (the fuzz target's
 * way in: bytes as read from a connection, everything after that as the loop does it). */
void handle_input(struct conn *c);
/* agent.c: serves the protocol until killed. Exactly one of listen_fd / stream_path is used. */
int agent_run(int listen_fd, const char *stream_path);

#endif
