/*
 * The warren agent protocol, version 1. Mirrored in ../protocol.ts: change both together.
 *
 * Transport-agnostic: a reliable, ordered byte stream in each direction (a Unix socket for
 * containers, a virtio serial port for VMs). The stream is a sequence of frames:
 *
 *   frame   = length body
 *   length  = 4 bytes, unsigned big-endian, the size of body: 1 .. WARREN_MAX_FRAME_BYTES
 *   body    = exactly one msgpack map with string keys
 *
 * Every body has "t" (the kind, a string). Requests carry "id", an unsigned integer the client
 * picks, unique among its requests in flight on that connection; every reply echoes it. Keys a
 * receiver does not know are ignored, so either side may add optional keys.
 *
 * Requests, client -> agent:
 *   ping   {id}                                         -> ok {id, version, pid}
 *   exec   {id, argv:[str], cwd?:str, env?:{str:str}, uid?, gid?, stdin?:bin,
 *           stdinStream?:bool, timeoutMs?, maxOutputBytes?, window?, pty?:bool, cols?, rows?,
 *           retain?:bool, tag?:str (with retain, up to WARREN_MAX_TAG bytes)}
 *                                                       -> started {id, pid}, out..., exit
 *                                                          or err {id, ...} if it could not start
 *   stdin  {id (the exec's), data?:bin, eof?:bool}       -> no reply (only for stdinStream execs);
 *          the agent sends taken as the command's stdin pipe takes the data (see "Stdin window")
 *   credit {id (the exec's), bytes}                     -> no reply (only for execs started with a window)
 *   execs  {id}                                         -> ok {id, execs:[{id, tag, pid, seq, acked, ended, attached}]}
 *          the resumable execs (see "Resumable execs" below); seq: the next out frame's
 *   attach {id (a resumable exec's), seq?(default its acked), window?}
 *                                                       -> started {id, pid}, out... from seq, exit
 *                                                          or err NOT_FOUND | err STREAM_RESUME_GAP
 *                                                          (seq older than what is kept) | INVALID
 *   ack    {id (a resumable exec's), seq}               -> no reply: frames below seq are had for good
 *   kill   {id, exec (an exec's id), signal?}           -> ok {id} | err NOT_FOUND
 *   resize {id, exec (a pty exec's id), cols, rows}     -> ok {id} | err NOT_FOUND | err INVALID
 *   read   {id, path, offset?, length?}                 -> ok {id, data:bin, size}
 *   write  {id, path, data:bin, mode?, append?, offset?, mkdirs?(default true)}
 *                                                       -> ok {id}
 *          without append or offset the file is replaced; with offset the bytes go there and
 *          nothing is truncated (a chunk sent twice lands on the same bytes)
 *   list   {id, path}                                   -> ok {id, entries:[entry], truncated}
 *   stat   {id, path, follow?}                          -> ok {id, type, size, mode, uid, gid, mtimeMs, target?}
 *   remove {id, path, recursive?}                       -> ok {id}
 *   mkdir  {id, path, mode?(default 0755), parents?}     -> ok {id}   (parents: mkdir -p)
 *   rename {id, path, to}                               -> ok {id}   (rename(2): atomic)
 *   symlink {id, path, target, mkdirs?(default true)}   -> ok {id}   (path -> target, as given)
 *   hostname {id, name}                                 -> ok {id}    (renames the sandbox)
 *   identity {id, name?, seed?:bin, timeMs?}            -> ok {id}    (a VM restored, pooled or
 *          resumed takes what is its own: the name, up to 512 bytes mixed into the kernel's
 *          random pool and the generator reseeded, the wall clock; seed and timeMs only in a
 *          VM: elsewhere err UNSUPPORTED naming the field)
 *   tree   {id, flatten?, window?, maxOutputBytes?}     -> started, out..., exit, as an exec
 *          (VM only, else err UNSUPPORTED): a pax tar of the writable layer, or with flatten
 *          of the whole tree from / without the other mounts' contents, on fd 1; exit code 0
 *          when every entry was read, non-zero with why on fd 2
 *
 * Replies and events, agent -> client:
 *   ok      {id, ...results}
 *   err     {id, code:"WARREN_ERR_*", message, field?}
 *                                                id is 0 when the request's id was unreadable;
 *                                                field names the request field at fault, when one
 *                                                is (an exec's "cwd", "user" for uid/gid, "pty")
 *   started {id, pid}                            the command is running (pid in the sandbox)
 *   taken   {id, bytes, closed?:bool}             streamed stdin the command's pipe took (or,
 *                                                closed, that its stdin is gone: the command closed
 *                                                it, or the client sent past the window)
 *   out     {id, seq, fd:1|2, data:bin}           seq counts the exec's out frames from 0
 *   exit    {id, seq, code?|signal?, timedOut, truncated, killed, durationMs}
 *                                                seq = the number of out frames sent before it
 *   entry   = {name, type:"file"|"dir"|"symlink"|"other", size, mode, mtimeMs}
 *
 * Output credit: an exec started with `window` sends at most that many bytes of out data before
 * the client grants more with `credit` (bytes it has freed). While an exec has no credit the
 * agent does not read its pipes, so the command blocks on write as on a slow terminal; after
 * the command ends its exit waits until what it left in its pipes was sent. Bytes beyond
 * maxOutputBytes are dropped without using credit. Without `window` there is no limit.
 *
 * Pseudo-terminal: an exec with `pty` runs on a new terminal of cols x rows (default 80 x 24)
 * that is its controlling terminal (its own session): stdin, stdout and stderr are the terminal,
 * all output comes as fd 1 under the same credit, stdin data is typed into it, and stdin's eof
 * types the terminal's EOF character (^D). `resize` sets the size; the command gets SIGWINCH.
 *
 * Names: a file name is any bytes but '/' and NUL, so every path and name field (path, to,
 * target, cwd; an entry's name, a stat's target) is a str when it is UTF-8 and a bin of its
 * bytes when it is not. Either is accepted for any of them.
 *
 * Rules: integers may arrive as any msgpack int or an integral float. A frame over the size
 * limit is answered with err FRAME_TOO_LARGE and the connection is closed (its length cannot be
 * trusted); a body that is not a map, lacks "t", or has a field of the wrong type gets err
 * MALFORMED_FRAME; an unknown kind gets err UNKNOWN_FRAME_KIND. The connection survives those.
 * An exec belongs to the connection that started it: when that connection closes, the exec's
 * process group is killed (nobody is left to read its result). Processes it left in the
 * background stay alive.
 *
 * Resumable execs (`retain`): such an exec belongs to the agent. Its id must be unique among
 * the agent's resumable execs (not only the connection's). When its connection closes it is
 * detached and runs on; every out frame is kept until an `ack` past its seq, so a host that
 * died holding frames it had not passed on gets them again: `attach` binds the exec to the new
 * connection and sends the kept frames from `seq` (its `window`, if given, is the new credit,
 * less what that resend carried). Kept output is bounded: credit holds while detached, and
 * past WARREN_RETAIN_MAX_BYTES unacknowledged the agent stops reading the pipes (the command
 * blocks; nothing is dropped). An ended exec's exit is kept until an ack past the exit's seq,
 * or WARREN_RETAIN_EXIT_MS while nobody is attached.
 */
#ifndef WARREN_PROTOCOL_H
#define WARREN_PROTOCOL_H

#define WARREN_PROTOCOL_VERSION 2

/* The largest frame body either side sends or accepts. */
#define WARREN_MAX_FRAME_BYTES (16 * 1024 * 1024 + 64 * 1024)
/* The most bytes one read returns or one write accepts. */
#define WARREN_MAX_FILE_BYTES (16 * 1024 * 1024)
/* The default cap on an exec's stdout + stderr bytes; the rest is dropped, truncated = true. */
#define WARREN_DEFAULT_MAX_OUTPUT_BYTES (16 * 1024 * 1024)
/* The most entries one list returns (truncated = true beyond). */
#define WARREN_MAX_LIST_ENTRIES 10000
/* The most argv or env items of an exec. */
#define WARREN_MAX_ARGS 4096
/* The longest path accepted. */
#define WARREN_MAX_PATH 4096
/* Connections and concurrent execs one agent serves. */
#define WARREN_MAX_CONNS 64
#define WARREN_MAX_EXECS 1024
/* The longest tag of a resumable exec. */
#define WARREN_MAX_TAG 64
/* What a resumable exec keeps unacknowledged at most (its output then waits: nothing is dropped). */
#define WARREN_RETAIN_MAX_BYTES (8 * 1024 * 1024)
/* Stdin window (version 2): a client keeps at most this much streamed stdin sent and not yet
 * taken; the agent holds at most WARREN_STDIN_MAX_BYTES of an exec's stdin, and closes its stdin
 * (taken closed) rather than hold more, so a command that does not read costs no more memory. */
#define WARREN_STDIN_WINDOW_BYTES (1024 * 1024)
#define WARREN_STDIN_MAX_BYTES (4 * 1024 * 1024)
/* How long a resumable exec that ended with nobody attached keeps its exit record. */
#define WARREN_RETAIN_EXIT_MS (10 * 60 * 1000)

/* Error codes: the stable strings of src/errors.ts. */
#define ERR_MALFORMED "WARREN_ERR_MALFORMED_FRAME"
#define ERR_TOO_LARGE "WARREN_ERR_FRAME_TOO_LARGE"
#define ERR_UNKNOWN_KIND "WARREN_ERR_UNKNOWN_FRAME_KIND"
#define ERR_INVALID "WARREN_ERR_INVALID_ARGUMENT"
#define ERR_NOT_FOUND "WARREN_ERR_NOT_FOUND"
#define ERR_FORBIDDEN "WARREN_ERR_FORBIDDEN"
#define ERR_NO_CAPACITY "WARREN_ERR_NO_CAPACITY"
#define ERR_QUOTA "WARREN_ERR_QUOTA"
#define ERR_OVERLOADED "WARREN_ERR_OVERLOADED"
#define ERR_UNSUPPORTED "WARREN_ERR_UNSUPPORTED"
#define ERR_UNAVAILABLE "WARREN_ERR_BACKEND_UNAVAILABLE"
#define ERR_INTERNAL "WARREN_ERR_INTERNAL"
#define ERR_RESUME_GAP "WARREN_ERR_STREAM_RESUME_GAP"

#endif
