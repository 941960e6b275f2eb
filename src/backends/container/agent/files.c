/* File operations, run by the agent inside the sandbox. The agent's root is the sandbox's root
 * (pivot_root, old root detached), so "..", absolute paths and symlinks resolve inside the
 * sandbox by construction: there is no path left that names a host file. Only regular files are
 * read or written, so a FIFO or a device can never block the agent. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent.h"

static const char *type_name(mode_t m)
{
	if (S_ISREG(m)) return "file";
	if (S_ISDIR(m)) return "dir";
	if (S_ISLNK(m)) return "symlink";
	return "other";
}

static uint64_t mtime_ms(const struct stat *st)
{
	if (st->st_mtim.tv_sec < 0) return 0;
	return (uint64_t)st->st_mtim.tv_sec * 1000 + (uint64_t)st->st_mtim.tv_nsec / 1000000;
}

void file_read(struct conn *c, const struct req *q)
{
	char path[WARREN_MAX_PATH + 1];
	if (take_path(c, q, path) < 0) return;
	/* O_NONBLOCK: a FIFO opens without waiting for a writer and is then refused below. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) { send_errno(c, q->id, errno, "open", path); return; }
	struct stat st;
	if (fstat(fd, &st) < 0) { send_errno(c, q->id, errno, "stat", path); close(fd); return; }
	if (S_ISDIR(st.st_mode)) { send_err(c, q->id, ERR_INVALID, "read %s: is a directory", path); close(fd); return; }
	if (!S_ISREG(st.st_mode)) { send_err_field(c, q->id, ERR_INVALID, "path", "read %s: not a regular file", path); close(fd); return; }
	uint64_t offset = q->has_offset ? q->offset : 0;
	uint64_t want;
	if (q->has_length) {
		want = q->length;
		if (want > WARREN_MAX_FILE_BYTES) {
			send_err(c, q->id, ERR_INVALID, "length %llu exceeds the limit of %d bytes", (unsigned long long)want, WARREN_MAX_FILE_BYTES);
			close(fd);
			return;
		}
	} else {
		uint64_t rest = (uint64_t)st.st_size > offset ? (uint64_t)st.st_size - offset : 0;
		if (rest > WARREN_MAX_FILE_BYTES) {
			send_err(c, q->id, ERR_INVALID, "read %s: %llu bytes exceed the limit of %d; read it in ranges (offset, length)",
				path, (unsigned long long)rest, WARREN_MAX_FILE_BYTES);
			close(fd);
			return;
		}
		/* Files in /proc and /sys say size 0 and still have content: read those up to the limit. */
		want = st.st_size == 0 ? WARREN_MAX_FILE_BYTES : rest;
	}
	size_t m = frame_begin(c);
	struct buf *b = &c->out;
	mp_w_map(b, 4);
	mp_w_cstr(b, "t"); mp_w_cstr(b, "ok");
	mp_w_cstr(b, "id"); mp_w_u64(b, q->id);
	mp_w_cstr(b, "size"); mp_w_u64(b, (uint64_t)st.st_size);
	mp_w_cstr(b, "data");
	/* A bin32 header is patched in once the real length is known. */
	static const uint8_t hdr[5] = { 0xc6, 0, 0, 0, 0 };
	buf_put(b, hdr, sizeof hdr);
	size_t hdr_at = buf_len(b) - sizeof hdr;
	size_t got = 0;
	int err = 0;
	while (got < want) {
		size_t chunk = want - got > 1 << 20 ? 1 << 20 : (size_t)(want - got);
		if (buf_reserve(b, chunk) < 0) { err = ENOMEM; break; }
		ssize_t n = pread(fd, b->data + b->end, chunk, (off_t)(offset + got));
		if (n < 0 && errno == EINTR) continue;
		if (n < 0 && errno == EAGAIN) break;
		if (n < 0) { err = errno; break; }
		if (n == 0) break;
		b->end += (size_t)n;
		got += (size_t)n;
	}
	close(fd);
	if (err) {
		/* Drop the half-built frame and say why instead. */
		b->end = b->start + m;
		b->oom = 0;
		send_errno(c, q->id, err, "read", path);
		return;
	}
	uint8_t *h = buf_head(b) + hdr_at;
	h[1] = (uint8_t)(got >> 24); h[2] = (uint8_t)(got >> 16); h[3] = (uint8_t)(got >> 8); h[4] = (uint8_t)got;
	frame_end(c, m);
}

/* mkdir -p of the directory part of path. */
static int make_parents(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/') continue;
		*p = 0;
		int r = mkdir(path, 0755);
		int err = errno;
		*p = '/';
		if (r < 0 && err != EEXIST) { errno = err; return -1; }
	}
	return 0;
}

void file_write(struct conn *c, const struct req *q)
{
	char path[WARREN_MAX_PATH + 1];
	if (take_path(c, q, path) < 0) return;
	if (!q->data.set) { send_err(c, q->id, ERR_INVALID, "write needs data"); return; }
	if (q->data.n > WARREN_MAX_FILE_BYTES) { send_err(c, q->id, ERR_INVALID, "data exceeds the limit of %d bytes", WARREN_MAX_FILE_BYTES); return; }
	mode_t mode = q->has_mode ? (mode_t)(q->mode & 07777) : 0644;
	struct stat pre;
	/* Refuse FIFOs and devices before opening them (a FIFO without a reader would be ENXIO). */
	if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode)) {
		send_err_field(c, q->id, ERR_INVALID, "path", "write %s: not a regular file", path);
		return;
	}
	if (q->mkdirs && make_parents(path) < 0) { send_errno(c, q->id, errno, "mkdir parents of", path); return; }
	/* `offset` writes the bytes there and truncates nothing, so a chunk of a streamed upload sent
	 * twice (a retry after a reconnect) lands on the same bytes: idempotent by offset. */
	if (q->has_offset && q->append) { send_err(c, q->id, ERR_INVALID, "write takes offset or append, not both"); return; }
	if (q->has_offset && q->offset > (uint64_t)INT64_MAX - q->data.n) { send_err(c, q->id, ERR_INVALID, "offset out of range"); return; }
	/* No O_TRUNC yet: first make sure it is a regular file (never truncate through a device). */
	int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (q->append ? O_APPEND : 0), mode);
	if (fd < 0) { send_errno(c, q->id, errno, "open", path); return; }
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		send_err_field(c, q->id, ERR_INVALID, "path", "write %s: not a regular file", path);
		close(fd);
		return;
	}
	if (!q->append && !q->has_offset && ftruncate(fd, 0) < 0) { send_errno(c, q->id, errno, "truncate", path); close(fd); return; }
	if (q->has_mode && fchmod(fd, mode) < 0) { send_errno(c, q->id, errno, "chmod", path); close(fd); return; }
	size_t done = 0;
	while (done < q->data.n) {
		ssize_t n = q->has_offset ? pwrite(fd, q->data.p + done, q->data.n - done, (off_t)(q->offset + done))
			: write(fd, q->data.p + done, q->data.n - done);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) { send_errno(c, q->id, n < 0 ? errno : EIO, "write", path); close(fd); return; }
		done += (size_t)n;
	}
	if (close(fd) < 0) { send_errno(c, q->id, errno, "close", path); return; }
	send_ok(c, q->id);
}

void file_list(struct conn *c, const struct req *q)
{
	char path[WARREN_MAX_PATH + 1];
	if (take_path(c, q, path) < 0) return;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) { send_errno(c, q->id, errno, "open", path); return; }
	DIR *d = fdopendir(fd);
	if (!d) { send_errno(c, q->id, errno, "opendir", path); close(fd); return; }
	/* Entries go to a scratch buffer first: the array header needs their count. */
	struct buf items = { 0 };
	uint32_t count = 0;
	int truncated = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
		if (count >= WARREN_MAX_LIST_ENTRIES || buf_len(&items) > WARREN_MAX_FRAME_BYTES - 64 * 1024) { truncated = 1; break; }
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue; /* gone meanwhile */
		mp_w_map(&items, 5);
		mp_w_cstr(&items, "name"); mp_w_name(&items, de->d_name, strlen(de->d_name));
		mp_w_cstr(&items, "type"); mp_w_cstr(&items, type_name(st.st_mode));
		mp_w_cstr(&items, "size"); mp_w_u64(&items, (uint64_t)st.st_size);
		mp_w_cstr(&items, "mode"); mp_w_u64(&items, st.st_mode & 07777);
		mp_w_cstr(&items, "mtimeMs"); mp_w_u64(&items, mtime_ms(&st));
		count++;
	}
	int err = errno;
	closedir(d);
	if (items.oom) { buf_free(&items); send_err(c, q->id, ERR_NO_CAPACITY, "list %s: out of memory", path); return; }
	if (!de && err && !truncated) { buf_free(&items); send_errno(c, q->id, err, "readdir", path); return; }
	size_t m = frame_begin(c);
	struct buf *b = &c->out;
	mp_w_map(b, 4);
	mp_w_cstr(b, "t"); mp_w_cstr(b, "ok");
	mp_w_cstr(b, "id"); mp_w_u64(b, q->id);
	mp_w_cstr(b, "truncated"); mp_w_bool(b, truncated);
	mp_w_cstr(b, "entries"); mp_w_array(b, count);
	buf_put(b, buf_head(&items), buf_len(&items));
	buf_free(&items);
	frame_end(c, m);
}

void file_stat(struct conn *c, const struct req *q)
{
	char path[WARREN_MAX_PATH + 1];
	if (take_path(c, q, path) < 0) return;
	struct stat st;
	int r = q->follow ? stat(path, &st) : lstat(path, &st);
	if (r < 0) { send_errno(c, q->id, errno, "stat", path); return; }
	char target[WARREN_MAX_PATH + 1];
	ssize_t tl = -1;
	if (S_ISLNK(st.st_mode)) tl = readlink(path, target, sizeof target - 1);
	size_t m = frame_begin(c);
	struct buf *b = &c->out;
	mp_w_map(b, tl >= 0 ? 9 : 8);
	mp_w_cstr(b, "t"); mp_w_cstr(b, "ok");
	mp_w_cstr(b, "id"); mp_w_u64(b, q->id);
	mp_w_cstr(b, "type"); mp_w_cstr(b, type_name(st.st_mode));
	mp_w_cstr(b, "size"); mp_w_u64(b, (uint64_t)st.st_size);
	mp_w_cstr(b, "mode"); mp_w_u64(b, st.st_mode & 07777);
	mp_w_cstr(b, "uid"); mp_w_u64(b, st.st_uid);
	mp_w_cstr(b, "gid"); mp_w_u64(b, st.st_gid);
	mp_w_cstr(b, "mtimeMs"); mp_w_u64(b, mtime_ms(&st));
	if (tl >= 0) { mp_w_cstr(b, "target"); mp_w_name(b, target, (size_t)tl); }
	frame_end(c, m);
}

/* Removes name (relative to dirfd) and, for a directory, everything below it: symlinks are
 * removed, never followed, and a directory on another device (a mount) is refused with EXDEV.
 * Only directories are compared: overlayfs reports the underlying layer's device for files. */
static int remove_tree(int dirfd, const char *name, dev_t dev, int depth)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return errno;
	if (!S_ISDIR(st.st_mode)) return unlinkat(dirfd, name, 0) < 0 ? errno : 0;
	if (st.st_dev != dev) return EXDEV;
	if (depth > 256) return ELOOP;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) return errno;
	DIR *d = fdopendir(fd);
	if (!d) { int err = errno; close(fd); return err; }
	/* Entries removed while reading may make readdir skip others: go round until it is empty. */
	for (int pass = 0; pass < 8; pass++) {
		int removed = 0, err = 0;
		struct dirent *de;
		rewinddir(d);
		while (!err && (de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
			err = remove_tree(fd, de->d_name, dev, depth + 1);
			removed++;
		}
		if (err) { closedir(d); return err; }
		if (!removed) break;
	}
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? errno : 0;
}

void file_remove(struct conn *c, const struct req *q)
{
	char path[WARREN_MAX_PATH + 1];
	if (take_path(c, q, path) < 0) return;
	struct stat st, root;
	if (lstat(path, &st) < 0) { send_errno(c, q->id, errno, "remove", path); return; }
	if (stat("/", &root) == 0 && st.st_dev == root.st_dev && st.st_ino == root.st_ino) {
		send_err(c, q->id, ERR_INVALID, "refusing to remove the root directory");
		return;
	}
	int r;
	if (!S_ISDIR(st.st_mode)) r = unlink(path) < 0 ? errno : 0;
	else if (!q->recursive) r = rmdir(path) < 0 ? errno : 0;
	else r = remove_tree(AT_FDCWD, path, st.st_dev, 0);
	if (r == EXDEV) { send_err(c, q->id, ERR_INVALID, "remove %s: a mount point is in the way", path); return; }
	if (r) { send_errno(c, q->id, r, "remove", path); return; }
	send_ok(c, q->id);
}

/* mkdir {path, mode?, parents?}: with parents, missing directories above are made too and a
 * directory already there is success (mkdir -p); without, an existing path is an error. */
void file_mkdir(struct conn *c, const struct req *q)
{
	char path[WARREN_MAX_PATH + 1];
	if (take_path(c, q, path) < 0) return;
	mode_t mode = q->has_mode ? (mode_t)(q->mode & 07777) : 0755;
	if (q->parents && make_parents(path) < 0) { send_errno(c, q->id, errno, "mkdir parents of", path); return; }
	if (mkdir(path, mode) < 0) {
		int err = errno;
		struct stat st;
		if (err == EEXIST && q->parents && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) { send_ok(c, q->id); return; }
		send_errno(c, q->id, err, "mkdir", path);
		return;
	}
	/* mkdir(2) applies the umask; the mode asked for is the mode given. */
	if (q->has_mode && chmod(path, mode) < 0) { send_errno(c, q->id, errno, "chmod", path); return; }
	send_ok(c, q->id);
}

/* rename {path, to}: rename(2), so within one file system it is atomic: a reader sees the old
 * file or the new one, never half of one. That is what makes a streamed upload atomic. */
void file_rename(struct conn *c, const struct req *q)
{
	char from[WARREN_MAX_PATH + 1], to[WARREN_MAX_PATH + 1];
	if (take_path(c, q, from) < 0) return;
	if (take_field_path(c, q, &q->to, "to", to) < 0) return;
	if (rename(from, to) < 0) { send_errno(c, q->id, errno, "rename", from); return; }
	send_ok(c, q->id);
}

/* symlink {path, target}: makes path a symlink holding target as given (resolved, when anyone
 * follows it, inside the sandbox like every path here). */
void file_symlink(struct conn *c, const struct req *q)
{
	char path[WARREN_MAX_PATH + 1], target[WARREN_MAX_PATH + 1];
	if (take_path(c, q, path) < 0) return;
	if (take_field_path(c, q, &q->target, "target", target) < 0) return;
	if (q->mkdirs && make_parents(path) < 0) { send_errno(c, q->id, errno, "mkdir parents of", path); return; }
	if (symlink(target, path) < 0) { send_errno(c, q->id, errno, "symlink", path); return; }
	send_ok(c, q->id);
}
