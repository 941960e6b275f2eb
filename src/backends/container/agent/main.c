/* warren-init: the in-sandbox init agent of warren, and the launcher that starts a container
 * sandbox with it as PID 1.
 *
 *   warren-init launch --id ID --upper DIR --socket PATH --layer IMAGE... [--hostname NAME] [--disk-mib N] [--cgroup G]...
 *       (host side) builds a sandbox; prints its PID; exits 0 when it is ready. See launch.c.
 *   warren-init agent --socket PATH
 *       serves the protocol on a Unix socket it binds (no namespaces: for protocol tests).
 *   warren-init agent --stream DEVICE
 *       serves one stream device, such as a VM's virtio serial port, reopening it on hang-up.
 *   warren-init vm   (or as /init, PID 1, of warren's initramfs)
 *       sets up a microVM's guest and serves its virtio serial port. See vm.c.
 *   warren-init ram create BYTES | ram seal
 *       (host side) a saved guest's RAM as a memfd, sealed once written. See ram.c.
 *
 * The protocol is described in protocol.h. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "agent.h"
#include "ram.h"
#include "sandbox.h"
#include "vm.h"

static int listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path) { fprintf(stderr, "warren-init: socket path too long\n"); return -1; }
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unlink(path);
	mode_t old = umask(0177);
	int r = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (r < 0 || listen(fd, 64) < 0) { perror("warren-init: listen"); return -1; }
	return fd;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "launch")) return launch_main(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "ram")) return ram_main(argc - 2, argv + 2);
	if ((argc == 2 && !strcmp(argv[1], "vm")) || (argc == 1 && getpid() == 1 && !strcmp(argv[0], "/init"))) return vm_main();
	if (argc == 4 && !strcmp(argv[1], "agent") && !strcmp(argv[2], "--socket")) {
		int fd = listen_on(argv[3]);
		return fd < 0 ? 1 : agent_run(fd, NULL);
	}
	if (argc == 4 && !strcmp(argv[1], "agent") && !strcmp(argv[2], "--stream")) return agent_run(-1, argv[3]);
	if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
		printf("warren-init protocol %d\n", WARREN_PROTOCOL_VERSION);
		return 0;
	}
	fprintf(stderr, "usage: warren-init launch ... | ram ... | agent --socket PATH | agent --stream DEVICE | vm | version\n");
	return 2;
}
