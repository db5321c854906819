/*
 * A heavy fence for Linux hosts, as a C program gives one to rcuref_heavy_install:
 * membarrier's private expedited command (every CPU running a thread of this process
 * executes a full barrier before it returns), registered once at start-up. Counts its
 * calls, for the tests that check when the library calls it.
 */
#ifndef RCUREF_TEST_MEMBARRIER_FENCE_H
#define RCUREF_TEST_MEMBARRIER_FENCE_H
#include <linux/membarrier.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_long heavy_fences;

/* Registers the process for the command: 0 on success, -1 where the kernel lacks it. */
static int membarrier_register(void)
{
	return (int)syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
}

static void membarrier_fence(void)
{
	atomic_fetch_add(&heavy_fences, 1);
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
		abort(); /* registered at start-up: cannot fail; no fence would be unsafe */
}
#endif
