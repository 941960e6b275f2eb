/* A VM's file tree as a pax tar (tree.c). */
#ifndef WARREN_TREE_H
#define WARREN_TREE_H

/* The writable layer's directory, kept open by vm.c before the switch of root; -1 elsewhere. */
extern int tree_upper_fd;

/* Writes the writable layer (or, with flatten, everything from /) as a tar to standard output.
 * Returns the exit code: 0, or non-zero with why on standard error. */
int tree_write(int flatten);

#endif
