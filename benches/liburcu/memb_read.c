/*
 * liburcu's memb flavour, measured the way benches/benches/rcu_read.rs measures rcuref:
 * T reader threads, each registered, each running rcu_read_lock + rcu_read_unlock in a
 * loop after a common start; the result is the median over threads and rounds of one
 * thread's time per section. With "writer", one more thread runs synchronize_rcu()
 * back to back meanwhile, and counts a call only if every reader was inside its timed
 * loop both before and after it (as the Rust side's WriterWindow does): calls made
 * while threads start or finish, with an empty registry, cost nothing and would
 * inflate the rate.
 *
 * Usage: memb_read <threads> <iterations> [idle|writer]
 * Prints one line: "memb_read threads=<T> mode=<m> ns_per_section=<x> writer_ops_per_s=<w>"
 * (the writer's counted synchronize_rcu calls per second of their own time; 0 without
 * a writer).
 *
 * Built by `cargo xtask bench` against Debian's liburcu-dev, with _LGPL_SOURCE so the
 * read side is inlined as applications that care about it build it.
 */
#define _LGPL_SOURCE
#define _GNU_SOURCE
#include <urcu/urcu-memb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 5
#define MAX_THREADS 256

static long iterations;
static pthread_barrier_t start;
static volatile int stop_writer;
static unsigned long writer_ops;
static double writer_busy_ns;
static long readers_wanted;
static atomic_long readers_running;
static double per_op[MAX_THREADS];

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *reader(void *arg)
{
	long id = (long)arg;
	urcu_memb_register_thread();
	pthread_barrier_wait(&start);
	atomic_fetch_add(&readers_running, 1);
	double t0 = now_ns();
	for (long i = 0; i < iterations; i++) {
		urcu_memb_read_lock();
		__asm__ __volatile__("" ::: "memory");
		urcu_memb_read_unlock();
	}
	per_op[id] = (now_ns() - t0) / (double)iterations;
	atomic_fetch_sub(&readers_running, 1);
	urcu_memb_unregister_thread();
	return NULL;
}

static void *writer(void *arg)
{
	(void)arg;
	while (!stop_writer) {
		int before = atomic_load(&readers_running) == readers_wanted;
		double t0 = now_ns();
		urcu_memb_synchronize_rcu();
		double t = now_ns() - t0;
		if (before && atomic_load(&readers_running) == readers_wanted) {
			writer_ops++;
			writer_busy_ns += t;
		}
	}
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
		fprintf(stderr, "usage: memb_read <threads> <iterations> [idle|writer]\n");
		return 2;
	}
	long threads = atol(argv[1]);
	iterations = atol(argv[2]);
	int with_writer = argc > 3 && strcmp(argv[3], "writer") == 0;
	if (threads < 1 || threads > MAX_THREADS || iterations < 1) {
		fprintf(stderr, "threads must be 1..%d, iterations at least 1\n", MAX_THREADS);
		return 2;
	}
	readers_wanted = threads;
	double all[ROUNDS * MAX_THREADS];
	int n = 0;
	for (int round = 0; round < ROUNDS; round++) {
		pthread_t t[MAX_THREADS], w;
		pthread_barrier_init(&start, NULL, (unsigned)threads);
		stop_writer = 0;
		if (with_writer)
			pthread_create(&w, NULL, writer, NULL);
		for (long i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, reader, (void *)i);
		for (long i = 0; i < threads; i++)
			pthread_join(t[i], NULL);
		stop_writer = 1;
		if (with_writer)
			pthread_join(w, NULL);
		pthread_barrier_destroy(&start);
		for (long i = 0; i < threads; i++)
			all[n++] = per_op[i];
	}
	qsort(all, n, sizeof all[0], cmp);
	printf("memb_read threads=%ld mode=%s ns_per_section=%.3f writer_ops_per_s=%.0f\n",
	       threads, with_writer ? "writer" : "idle", all[n / 2],
	       with_writer && writer_busy_ns > 0 ? writer_ops / (writer_busy_ns / 1e9) : 0.0);
	return 0;
}
