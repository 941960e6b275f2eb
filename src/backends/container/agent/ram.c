/* Host side, for the microVM backend: a saved guest's RAM as a memfd that can be sealed.
 *
 *   warren-init ram create BYTES
 *       makes a memfd of BYTES (its size sealed at once) as fd 3, writes "ready\n", and keeps it
 *       until its stdin ends; the node opens /proc/<pid>/fd/3 meanwhile and holds it from then on.
 *   warren-init ram seal
 *       gives every hole of the memfd it is given as fd 3 its page, then seals it against every
 *       write, size change and further seal.
 *
 * Why: every VM restored from a template maps the template's RAM private, and QEMU opens that
 * file read-write whatever its mapping. Sealed, no process can change a page of it any more, a
 * QEMU a guest took over included: write, a shared writable mapping, hole punching and truncation
 * all fail, while private mappings still copy on write. Node has no fcntl, hence this. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ram.h"

#define RAM_FD 3
#define SIZE_SEALS (F_SEAL_GROW | F_SEAL_SHRINK)
#define ALL_SEALS (F_SEAL_WRITE | SIZE_SEALS | F_SEAL_SEAL)

static int ram_create(const char *size)
{
	char *end;
	errno = 0;
	unsigned long long bytes = strtoull(size, &end, 10);
	if (errno != 0 || *end != '\0' || bytes == 0 || bytes % 4096 != 0) {
		fprintf(stderr, "warren-init ram create: size %s is not a positive multiple of 4096\n", size);
		return 2;
	}
	int fd = memfd_create("warren-guest-ram", MFD_ALLOW_SEALING);
	if (fd < 0) { perror("warren-init ram create: memfd_create"); return 1; }
	if (ftruncate(fd, (off_t)bytes) < 0) { perror("warren-init ram create: ftruncate"); return 1; }
	if (fcntl(fd, F_ADD_SEALS, SIZE_SEALS) < 0) { perror("warren-init ram create: seal its size"); return 1; }
	if (fd != RAM_FD) {
		if (dup2(fd, RAM_FD) < 0) { perror("warren-init ram create: dup2"); return 1; }
		close(fd);
	}
	if (write(STDOUT_FILENO, "ready\n", 6) != 6) return 1;
	char b[64];
	while (read(STDIN_FILENO, b, sizeof b) > 0) {}
	return 0;
}

static int ram_seal(void)
{
	/* A VM restored from it that touches a hole (a page the saved guest never wrote) makes shmem
	 * fill it, charged to that VM's QEMU, beside the VM's own copy: twice the guest's memory in one
	 * cgroup, and the host's OOM killer ended a guest that had filled its RAM. Allocated here,
	 * the holes are charged once, to the node, and every VM shares them as it shares the rest. */
	struct stat st;
	if (fstat(RAM_FD, &st) < 0) { perror("warren-init ram seal: fstat"); return 1; }
	if (fallocate(RAM_FD, 0, 0, st.st_size) < 0) { perror("warren-init ram seal: fallocate"); return 1; }
	// EBUSY: something still maps it shared and writable (the QEMU that wrote it has not ended).
	if (fcntl(RAM_FD, F_ADD_SEALS, ALL_SEALS) < 0) { perror("warren-init ram seal"); return 1; }
	int seals = fcntl(RAM_FD, F_GET_SEALS);
	if (seals < 0 || (seals & ALL_SEALS) != ALL_SEALS) { fprintf(stderr, "warren-init ram seal: the seals did not hold\n"); return 1; }
	return 0;
}

int ram_main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[0], "create")) return ram_create(argv[1]);
	if (argc == 1 && !strcmp(argv[0], "seal")) return ram_seal();
	fprintf(stderr, "usage: warren-init ram create BYTES | ram seal\n");
	return 2;
}
