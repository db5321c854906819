/*
 * The C tests' check: CHECK(cond) reports a false condition with its place and goes
 * on; `failures` counts them, and the test's main turns a non-zero count into exit 1.
 */
#ifndef RCUREF_TEST_CHECK_H
#define RCUREF_TEST_CHECK_H
#include <stdio.h>

static int failures;
#define CHECK(cond)                                                                  \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                   \
		}                                                                     \
	} while (0)

#endif
