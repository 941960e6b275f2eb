/* The seccomp filter every command (and everything it starts) runs under. */
#ifndef WARREN_SECCOMP_H
#define WARREN_SECCOMP_H

/* Installs the filter on the calling thread (no_new_privs must be set: the launcher sets it).
 * Returns 0, or -1 with errno. */
int seccomp_install_command_filter(void);

/* Inside a VM (vm.c) the guest kernel is the boundary: commands run unfiltered from then on. */
void seccomp_disable_for_vm(void);

#endif
