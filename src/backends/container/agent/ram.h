/* A guest's RAM for the host: a memfd the node holds, sealed once written (see ram.c). */
#ifndef WARREN_RAM_H
#define WARREN_RAM_H

int ram_main(int argc, char **argv);

#endif
