// version.c: see version.h. BEST_VERSION comes from the Makefile, for this file only (a
// new commit recompiles one file, not the library).
#include "base/version.h"

#ifndef BEST_VERSION
#define BEST_VERSION "unknown"
#endif

const char *best_version(void) { return BEST_VERSION; }
