/*
 * The cost of a read section from C, in one process and one run: rcuref's C API
 * (librcuref_ffi.a) through a context (rcuref_read_lock/unlock, whose owner check
 * loads the slot's owner word on each call), through the current-context form
 * (rcuref_rcu_read_lock/unlock, which also calls the function registered with
 * rcuref_set_current_context, here one that returns a thread-local context), and
 * liburcu's memb flavour (rcu_read_lock/unlock, inlined with _LGPL_SOURCE), the
 * baseline. As benches/liburcu/memb_read.c: T threads, each with its own context
 * (slot t of domain 0, owner t + 1) or registered with liburcu, each timing N
 * sections in a tight loop after a common start; ROUNDS rounds, the modes taking turns
 * within each round; per mode, the median over threads and rounds of one thread's
 * time per section. The library's calls are real calls (a static archive, no
 * cross-language inlining): what a C caller pays.
 *
 * Usage: ffi_read <threads> <iterations>
 * Prints one line per mode: "ffi_read mode=<m> threads=<T> ns_per_section=<x>", modes
 * memb, ctx, current.
 *
 * Built by `cargo xtask bench-c` against Debian's liburcu-dev and the host archive.
 */
#define _LGPL_SOURCE
#define _GNU_SOURCE
#include "rcuref.h"
#include <urcu/urcu-memb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 7
#define MAX_THREADS 8 /* the archive's slots per domain (RCUREF_FFI_SLOTS default) */
#define MODES 3

static const char *const mode_name[MODES] = { "memb", "ctx", "current" };
static long iterations;
static int mode;
static pthread_barrier_t start;
static double per_op[MAX_THREADS];
static _Thread_local rcuref_ctx my_ctx;
static atomic_int bad;

static const rcuref_ctx *current(void)
{
	return &my_ctx;
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *reader(void *arg)
{
	long id = (long)arg;
	const rcuref_ctx *c = &my_ctx;
	if (mode == 0)
		urcu_memb_register_thread();
	else if (rcuref_ctx_open(rcuref_rcu_domain(0), (uint32_t)id, (uintptr_t)id + 1,
				 &my_ctx) != RCUREF_OK)
		atomic_store_explicit(&bad, 1, memory_order_relaxed);
	pthread_barrier_wait(&start);
	double t0 = now_ns();
	switch (mode) {
	case 0:
		for (long i = 0; i < iterations; i++) {
			urcu_memb_read_lock();
			__asm__ __volatile__("" ::: "memory");
			urcu_memb_read_unlock();
		}
		break;
	case 1:
		for (long i = 0; i < iterations; i++) {
			if (rcuref_read_lock(c) != RCUREF_OK)
				atomic_store_explicit(&bad, 1, memory_order_relaxed);
			__asm__ __volatile__("" ::: "memory");
			rcuref_read_unlock(c);
		}
		break;
	case 2:
		for (long i = 0; i < iterations; i++) {
			if (rcuref_rcu_read_lock() != RCUREF_OK)
				atomic_store_explicit(&bad, 1, memory_order_relaxed);
			__asm__ __volatile__("" ::: "memory");
			rcuref_rcu_read_unlock();
		}
		break;
	}
	per_op[id] = (now_ns() - t0) / (double)iterations;
	if (mode == 0)
		urcu_memb_unregister_thread();
	else if (rcuref_ctx_close(&my_ctx) != RCUREF_OK)
		atomic_store_explicit(&bad, 1, memory_order_relaxed);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: ffi_read <threads> <iterations>\n");
		return 2;
	}
	long threads = atol(argv[1]);
	iterations = atol(argv[2]);
	if (threads < 1 || threads > MAX_THREADS || iterations < 1 ||
	    threads > (long)rcuref_rcu_slots(rcuref_rcu_domain(0))) {
		fprintf(stderr, "threads must be 1..%d (and the archive's slots), iterations "
				"at least 1\n",
			MAX_THREADS);
		return 2;
	}
	rcuref_set_current_context(current);
	static double all[MODES][ROUNDS * MAX_THREADS];
	int n = 0;
	for (int round = 0; round < ROUNDS; round++) {
		for (mode = 0; mode < MODES; mode++) {
			pthread_t t[MAX_THREADS];
			pthread_barrier_init(&start, NULL, (unsigned)threads);
			for (long i = 0; i < threads; i++)
				pthread_create(&t[i], NULL, reader, (void *)i);
			for (long i = 0; i < threads; i++)
				pthread_join(t[i], NULL);
			pthread_barrier_destroy(&start);
			for (long i = 0; i < threads; i++)
				all[mode][n + i] = per_op[i];
		}
		n += (int)threads;
	}
	if (bad) {
		fprintf(stderr, "ffi_read: a call of the C API failed\n");
		return 1;
	}
	for (int m = 0; m < MODES; m++) {
		qsort(all[m], n, sizeof all[m][0], cmp);
		printf("ffi_read mode=%s threads=%ld ns_per_section=%.3f\n", mode_name[m], threads,
		       all[m][n / 2]);
	}
	return 0;
}
