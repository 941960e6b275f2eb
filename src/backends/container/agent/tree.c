/* A VM's file tree as a POSIX (pax) tar on standard output, for a snapshot (the `tree` request,
 * run in a child the agent forks: its output is streamed like an exec's, within the client's
 * credit). The host unpacks it into a staging directory and builds the EROFS layer from that,
 * as it does for a container's writable layer.
 *
 *   upper    the overlay's writable layer (a tmpfs the root no longer reaches: through the
 *            descriptor vm.c kept, /proc/self/fd/N), exactly as overlayfs stacks it: owners,
 *            modes, mtimes, every xattr (trusted.overlay.opaque on a directory made again),
 *            whiteouts (char devices 0:0), symlinks, hardlinks, empty directories;
 *   flatten  the whole tree the guest sees from /, its layers and its writes merged; the other
 *            mounts (/proc, /sys, /dev, the module disk...) are kept as empty directories.
 *
 * Entries are written depth first, a directory before what it holds. A regular file gets exactly
 * the size its header says (one that shrank meanwhile is padded with zeros, one that grew is cut):
 * the snapshot freezes the guest's commands first, so that happens only to files it cannot hold
 * still. Sockets are left out (they cannot be archived). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "tree.h"

#define BLOCK 512
#define MAX_MOUNTS 256
/* An xattr list or value larger than this is not a sandbox's (the kernel allows 64 KiB values). */
#define XATTR_MAX (64 * 1024)

int tree_upper_fd = -1;

static char prefix[64];        /* what the walked paths are relative to: "" for /, or /proc/self/fd/N */
static char *mounts[MAX_MOUNTS]; /* flatten: mount points (relative, no leading /) whose contents are left out */
static int nmounts;
static int failed;

struct link { dev_t dev; ino_t ino; char *name; };
static struct link *links;
static size_t nlinks, caplinks;

static void warn(const char *what, const char *path)
{
	fprintf(stderr, "warren-init tree: %s %s: %s\n", what, path, strerror(errno));
	failed = 1;
}

static int put(const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(1, c, n);
		if (w < 0 && errno == EINTR) continue;
		if (w <= 0) return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* len-1 octal digits, zero padded, then a NUL (the caller made sure v fits). */
static void octal(char *field, size_t len, uint64_t v)
{
	field[len - 1] = 0;
	for (size_t i = len - 1; i > 0; i--, v >>= 3) field[i - 1] = (char)('0' + (v & 7));
}

/* Appends one pax record "LEN key=value\n" (LEN counts the whole record, its own digits too). */
static int pax_record(char **rec, size_t *len, size_t *cap, const char *key, const char *val, size_t vlen)
{
	size_t body = strlen(key) + vlen + 3; /* ' ' '=' '\n' */
	size_t digits = 1, total;
	for (;;) {
		total = body + digits;
		size_t d = 1;
		for (size_t t = total; t >= 10; t /= 10) d++;
		if (d == digits) break;
		digits = d;
	}
	if (*len + total > *cap) {
		size_t nc = (*len + total) * 2;
		char *n = realloc(*rec, nc);
		if (!n) return -1;
		*rec = n;
		*cap = nc;
	}
	int head = snprintf(*rec + *len, total + 1, "%zu %s=", total, key);
	memcpy(*rec + *len + head, val, vlen);
	(*rec)[*len + total - 1] = '\n';
	*len += total;
	return 0;
}

static int header(const char *name, char type, const struct stat *st, uint64_t size, const char *linkname)
{
	char h[BLOCK];
	memset(h, 0, sizeof h);
	snprintf(h, 100, "%s", name);
	octal(h + 100, 8, st->st_mode & 07777);
	octal(h + 108, 8, st->st_uid > 07777777 ? 0 : st->st_uid);
	octal(h + 116, 8, st->st_gid > 07777777 ? 0 : st->st_gid);
	octal(h + 124, 12, size > 077777777777ULL ? 0 : size);
	octal(h + 136, 12, st->st_mtime < 0 ? 0 : (uint64_t)st->st_mtime);
	h[156] = type;
	if (linkname) snprintf(h + 157, 100, "%s", linkname);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	if (type == '3' || type == '4') {
		octal(h + 329, 8, major(st->st_rdev));
		octal(h + 337, 8, minor(st->st_rdev));
	}
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < BLOCK; i++) sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	h[155] = ' ';
	return put(h, sizeof h);
}

/* The pax extended header an entry needs: long names, large numbers, and its xattrs. */
static int extended(const char *path, const char *name, const struct stat *st, uint64_t size, const char *linkname)
{
	char *rec = NULL;
	size_t len = 0, cap = 0;
	char num[32];
	int bad = 0;
	if (strlen(name) >= 100) bad |= pax_record(&rec, &len, &cap, "path", name, strlen(name));
	if (linkname && strlen(linkname) >= 100) bad |= pax_record(&rec, &len, &cap, "linkpath", linkname, strlen(linkname));
	if (size > 077777777777ULL) { snprintf(num, sizeof num, "%llu", (unsigned long long)size); bad |= pax_record(&rec, &len, &cap, "size", num, strlen(num)); }
	if (st->st_uid > 07777777) { snprintf(num, sizeof num, "%u", (unsigned)st->st_uid); bad |= pax_record(&rec, &len, &cap, "uid", num, strlen(num)); }
	if (st->st_gid > 07777777) { snprintf(num, sizeof num, "%u", (unsigned)st->st_gid); bad |= pax_record(&rec, &len, &cap, "gid", num, strlen(num)); }
	snprintf(num, sizeof num, "%lld.%09ld", (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
	bad |= pax_record(&rec, &len, &cap, "mtime", num, strlen(num));
	static char names[XATTR_MAX], value[XATTR_MAX];
	ssize_t nl = llistxattr(path, names, sizeof names);
	for (ssize_t at = 0; nl > 0 && at < nl; at += (ssize_t)strlen(names + at) + 1) {
		ssize_t vl = lgetxattr(path, names + at, value, sizeof value);
		if (vl < 0) { warn("read xattr of", path); continue; }
		char key[300];
		snprintf(key, sizeof key, "SCHILY.xattr.%s", names + at);
		bad |= pax_record(&rec, &len, &cap, key, value, (size_t)vl);
	}
	if (nl < 0 && errno != ENOTSUP && errno != ENODATA) warn("list xattrs of", path);
	int r = bad ? -1 : 0;
	if (!r && len > 0) {
		struct stat x = *st;
		x.st_mode = 0644;
		r = header("././@PaxHeader", 'x', &x, len, NULL);
		if (!r) r = put(rec, len);
		static const char zero[BLOCK];
		if (!r && len % BLOCK) r = put(zero, BLOCK - len % BLOCK);
	}
	free(rec);
	return r;
}

/* The name a hardlinked inode was first written under, or NULL (and it is remembered). */
static const char *seen_link(const struct stat *st, const char *name)
{
	for (size_t i = 0; i < nlinks; i++)
		if (links[i].dev == st->st_dev && links[i].ino == st->st_ino) return links[i].name;
	if (nlinks == caplinks) {
		size_t nc = caplinks ? caplinks * 2 : 64;
		struct link *n = realloc(links, nc * sizeof *n);
		if (!n) return NULL;
		links = n;
		caplinks = nc;
	}
	char *copy = strdup(name);
	if (copy) links[nlinks++] = (struct link){ st->st_dev, st->st_ino, copy };
	return NULL;
}

static int file_body(const char *path, uint64_t size)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) warn("open", path);
	static char chunk[64 * 1024];
	uint64_t done = 0;
	while (done < size) {
		size_t want = size - done < sizeof chunk ? (size_t)(size - done) : sizeof chunk;
		ssize_t n = fd >= 0 ? read(fd, chunk, want) : 0;
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) { memset(chunk, 0, want); n = (ssize_t)want; } /* shrank or unreadable: zeros */
		if (put(chunk, (size_t)n) < 0) { if (fd >= 0) close(fd); return -1; }
		done += (uint64_t)n;
	}
	if (fd >= 0) close(fd);
	static const char zero[BLOCK];
	return size % BLOCK ? put(zero, BLOCK - size % BLOCK) : 0;
}

static int is_mount(const char *rel)
{
	for (int i = 0; i < nmounts; i++) if (!strcmp(mounts[i], rel)) return 1;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Writes `rel` (relative to the prefix; "" is the top) and, for a directory, what it holds. */
static int walk(const char *rel)
{
	char path[4096 + 80], name[4096 + 2];
	snprintf(path, sizeof path, "%s/%s", prefix, rel);
	struct stat st;
	if (lstat(path, &st) < 0) { if (errno != ENOENT) warn("stat", path); return 0; }
	if (*rel) snprintf(name, sizeof name, "%s%s", rel, S_ISDIR(st.st_mode) ? "/" : "");
	else snprintf(name, sizeof name, "./");
	char target[4096];
	const char *link = NULL;
	char type;
	uint64_t size = 0;
	if (S_ISREG(st.st_mode)) {
		type = '0';
		size = (uint64_t)st.st_size;
		if (st.st_nlink > 1 && (link = seen_link(&st, name)) != NULL) { type = '1'; size = 0; }
	} else if (S_ISDIR(st.st_mode)) type = '5';
	else if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(path, target, sizeof target - 1);
		if (n < 0) { warn("readlink", path); return 0; }
		target[n] = 0;
		link = target;
		type = '2';
	} else if (S_ISCHR(st.st_mode)) type = '3';
	else if (S_ISBLK(st.st_mode)) type = '4';
	else if (S_ISFIFO(st.st_mode)) type = '6';
	else return 0; /* a socket */
	if (extended(path, name, &st, size, link) < 0 || header(name, type, &st, size, link) < 0) return -1;
	if (type == '0' && file_body(path, size) < 0) return -1;
	if (type != '5' || (*rel && is_mount(rel))) return 0;
	DIR *d = opendir(path);
	if (!d) { warn("open directory", path); return 0; }
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
		if (n == cap) { cap = cap ? cap * 2 : 32; char **g = realloc(names, cap * sizeof *g); if (!g) break; names = g; }
		if (!(names[n] = strdup(e->d_name))) break;
		n++;
	}
	closedir(d);
	/* Sorted: the same tree gives the same archive, and so the same layer digest. */
	if (n > 1) qsort(names, n, sizeof *names, by_name);
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		char child[4096];
		int len = snprintf(child, sizeof child, "%s%s%s", rel, *rel ? "/" : "", names[i]);
		if (len >= (int)sizeof child - 1) { errno = ENAMETOOLONG; warn("walk", names[i]); }
		else if (r == 0) r = walk(child);
		free(names[i]);
	}
	free(names);
	return r;
}

/* Mount points of the guest other than / (flatten leaves their contents out). */
static void read_mounts(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	while (f && fgets(line, sizeof line, f) && nmounts < MAX_MOUNTS) {
		/* id parent major:minor root mountpoint ... */
		char *save = NULL, *field = strtok_r(line, " ", &save);
		for (int i = 0; field && i < 4; i++) field = strtok_r(NULL, " ", &save);
		if (!field || !strcmp(field, "/")) continue;
		char unescaped[4096];
		size_t o = 0;
		for (const char *p = field + 1; *p && o < sizeof unescaped - 1; p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
				unescaped[o++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else unescaped[o++] = *p;
		}
		unescaped[o] = 0;
		mounts[nmounts] = strdup(unescaped);
		if (mounts[nmounts]) nmounts++;
	}
	if (f) fclose(f);
}

int tree_write(int flatten)
{
	if (flatten) {
		prefix[0] = 0;
		read_mounts();
	} else {
		if (tree_upper_fd < 0) { fprintf(stderr, "warren-init tree: no writable layer is known here\n"); return 2; }
		snprintf(prefix, sizeof prefix, "/proc/self/fd/%d", tree_upper_fd);
	}
	if (walk("") < 0) { fprintf(stderr, "warren-init tree: writing the archive: %s\n", strerror(errno)); return 1; }
	static const char end[2 * BLOCK];
	if (put(end, sizeof end) < 0) return 1;
	return failed ? 3 : 0;
}
