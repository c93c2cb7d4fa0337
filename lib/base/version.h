// version.h: the build's version, `git describe --always --dirty` of the tree it was built
// from (the Makefile passes it in; "unknown" outside a git checkout). Shown by every tool's
// --version and recorded in the config.json best-train writes.
#ifndef BEST_VERSION_H
#define BEST_VERSION_H

const char *best_version(void);

#endif
