/* The agent as PID 1 of a microVM (vm.c). */
#ifndef WARREN_VM_H
#define WARREN_VM_H

/* Sets up the guest (modules, layers, root, devices) and serves the agent on its virtio serial
 * port. Returns only on a fatal error of the loop; set-up failures power the VM off. */
int vm_main(void);

#endif
