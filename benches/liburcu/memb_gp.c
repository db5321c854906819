/*
 * liburcu's memb flavour, grace-period rows, measured the way benches/src/bin/gp.rs
 * measures rcuref (same rows, protocol and output line; see there):
 *   latency         synchronize_rcu with one registered reader thread, idle
 *   latency-reader  from a reader's unlock (it held its section HOLD_NS) to the return
 *                   of the synchronize_rcu the writer began when the reader entered
 *   latency-preempted  as latency-reader, but the reader sleeps PREEMPTED_US inside
 *                   its section while T busy threads occupy the cores (synchronize_rcu
 *                   sleeps on its futex, woken by the reader's unlock)
 *   throughput      T threads calling synchronize_rcu back to back for a second
 *   read-paced      one reader thread's ns per section over a second while a writer
 *                   calls synchronize_rcu at PACE per second (writer= its achieved rate)
 *   defer           T threads calling call_rcu(free) for a second; frees per second,
 *                   counted in the callback, after rcu_barrier (liburcu's default
 *                   call_rcu worker thread does the grace periods and the frees)
 *
 * Usage: memb_gp <row> <threads>
 * Prints: "gp row=<row> threads=<t> median=<x> p99=<y> unit=<ns|per_s>"
 *
 * Built by `cargo xtask bench` against Debian's liburcu-dev, with _LGPL_SOURCE; built
 * with -DMB_FLAVOUR (and -lurcu-mb) the same rows measure liburcu's mb flavour, whose
 * read side runs a full fence as rcuref's static full fence does (the memb names below
 * then stand for mb's functions).
 */
#define _LGPL_SOURCE
#define _GNU_SOURCE
#ifdef MB_FLAVOUR
#include <urcu/urcu-mb.h>
#define urcu_memb_read_lock urcu_mb_read_lock
#define urcu_memb_read_unlock urcu_mb_read_unlock
#define urcu_memb_register_thread urcu_mb_register_thread
#define urcu_memb_unregister_thread urcu_mb_unregister_thread
#define urcu_memb_synchronize_rcu urcu_mb_synchronize_rcu
#define urcu_memb_call_rcu urcu_mb_call_rcu
#define urcu_memb_barrier urcu_mb_barrier
#else
#include <urcu/urcu-memb.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#define HOLD_NS 20000
#define PACE 20000.0
#define ROUNDS 2000
#define PREEMPTED_US 100
#define MAX_THREADS 256

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
	qsort(v, n, sizeof v[0], cmp);
	return v[(int)((n - 1) * p)];
}

/* The idle registered reader: registered, never in a section, asleep on a mutex. */
static pthread_mutex_t idle_hold = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t idle_ready;
static pthread_t idle_thread;

static void *idle_reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	pthread_barrier_wait(&idle_ready);
	pthread_mutex_lock(&idle_hold);
	pthread_mutex_unlock(&idle_hold);
	urcu_memb_unregister_thread();
	return NULL;
}

static void idle_start(void)
{
	pthread_mutex_lock(&idle_hold);
	pthread_barrier_init(&idle_ready, NULL, 2);
	pthread_create(&idle_thread, NULL, idle_reader, NULL);
	pthread_barrier_wait(&idle_ready);
}

static void idle_stop(void)
{
	pthread_mutex_unlock(&idle_hold);
	pthread_join(idle_thread, NULL);
}

static void latency(double *median, double *p99)
{
	static double per_call[ROUNDS];
	idle_start();
	for (int r = 0; r < ROUNDS; r++) {
		double t0 = now_ns();
		for (int i = 0; i < 64; i++)
			urcu_memb_synchronize_rcu();
		per_call[r] = (now_ns() - t0) / 64.0;
	}
	idle_stop();
	*median = pct(per_call, ROUNDS, 0.5);
	*p99 = pct(per_call, ROUNDS, 0.99);
}

static atomic_long entered, done;
static atomic_long left_at_ns;
static double base;

static void *holding_reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	for (long round = 1; round <= ROUNDS; round++) {
		while (atomic_load_explicit(&done, memory_order_acquire) != round - 1)
			caa_cpu_relax();
		urcu_memb_read_lock();
		double t_in = now_ns();
		atomic_store_explicit(&entered, round, memory_order_release);
		while (now_ns() < t_in + HOLD_NS)
			caa_cpu_relax();
		atomic_store_explicit(&left_at_ns, (long)(now_ns() - base), memory_order_relaxed);
		urcu_memb_read_unlock();
	}
	urcu_memb_unregister_thread();
	return NULL;
}

static void latency_reader(double *median, double *p99)
{
	static double after[ROUNDS];
	pthread_t t;
	base = now_ns();
	pthread_create(&t, NULL, holding_reader, NULL);
	for (long round = 1; round <= ROUNDS; round++) {
		while (atomic_load_explicit(&entered, memory_order_acquire) != round)
			caa_cpu_relax();
		urcu_memb_synchronize_rcu();
		double back = now_ns() - base;
		double d = back - (double)atomic_load_explicit(&left_at_ns, memory_order_relaxed);
		after[round - 1] = d > 0 ? d : 0;
		atomic_store_explicit(&done, round, memory_order_release);
	}
	pthread_join(t, NULL);
	*median = pct(after, ROUNDS, 0.5);
	*p99 = pct(after, ROUNDS, 0.99);
}

static atomic_int hog_stop;

static void *hog(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&hog_stop, memory_order_relaxed))
		caa_cpu_relax();
	return NULL;
}

static void *preempted_reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	for (long round = 1; round <= ROUNDS; round++) {
		while (atomic_load_explicit(&done, memory_order_acquire) != round - 1)
			caa_cpu_relax();
		urcu_memb_read_lock();
		atomic_store_explicit(&entered, round, memory_order_release);
		/* Descheduled inside the section: the busy threads take the core. */
		struct timespec ts = { 0, PREEMPTED_US * 1000L };
		nanosleep(&ts, NULL);
		atomic_store_explicit(&left_at_ns, (long)(now_ns() - base), memory_order_relaxed);
		urcu_memb_read_unlock();
	}
	urcu_memb_unregister_thread();
	return NULL;
}

static void latency_preempted(long hogs, double *median, double *p99)
{
	static double after[ROUNDS];
	static pthread_t hs[MAX_THREADS];
	pthread_t t;
	int waited = 0;
	atomic_store(&entered, 0);
	atomic_store(&done, 0);
	base = now_ns();
	for (long i = 0; i < hogs; i++)
		pthread_create(&hs[i], NULL, hog, NULL);
	pthread_create(&t, NULL, preempted_reader, NULL);
	for (long round = 1; round <= ROUNDS; round++) {
		while (atomic_load_explicit(&entered, memory_order_acquire) != round)
			caa_cpu_relax();
		double began = now_ns() - base;
		urcu_memb_synchronize_rcu();
		double back = now_ns() - base;
		double left = (double)atomic_load_explicit(&left_at_ns, memory_order_relaxed);
		/* A round whose call began after the unlock timed the scheduler: left out. */
		if (began < left)
			after[waited++] = back - left;
		atomic_store_explicit(&done, round, memory_order_release);
	}
	pthread_join(t, NULL);
	fprintf(stderr, "latency-preempted: %d of %d rounds waited\n", waited, ROUNDS);
	if (waited == 0)
		after[waited++] = NAN;
	atomic_store(&hog_stop, 1);
	for (long i = 0; i < hogs; i++)
		pthread_join(hs[i], NULL);
	*median = pct(after, waited, 0.5);
	*p99 = pct(after, waited, 0.99);
}

static atomic_int stop;
static pthread_barrier_t pair;
static double paced_rate;

static void *paced_writer(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&pair);
	double t0 = now_ns();
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		n++;
		while (now_ns() < t0 + n * (1e9 / PACE))
			caa_cpu_relax();
		urcu_memb_synchronize_rcu();
	}
	paced_rate = n / ((now_ns() - t0) / 1e9);
	return NULL;
}

static double read_paced(void)
{
	pthread_t w;
	atomic_store(&stop, 0);
	pthread_barrier_init(&pair, NULL, 2);
	urcu_memb_register_thread();
	pthread_create(&w, NULL, paced_writer, NULL);
	pthread_barrier_wait(&pair);
	double t0 = now_ns();
	long sections = 0;
	while (now_ns() - t0 < 1e9) {
		for (int i = 0; i < 1024; i++) {
			urcu_memb_read_lock();
			__asm__ __volatile__("" ::: "memory");
			urcu_memb_read_unlock();
		}
		sections += 1024;
	}
	double ns = (now_ns() - t0) / sections;
	atomic_store(&stop, 1);
	pthread_join(w, NULL);
	urcu_memb_unregister_thread();
	return ns;
}

static pthread_barrier_t start;
static atomic_long freed;

struct node {
	struct rcu_head head;
	long value;
};

static void free_node(struct rcu_head *h)
{
	free(caa_container_of(h, struct node, head));
	atomic_fetch_add_explicit(&freed, 1, memory_order_relaxed);
}

static void *synchronizer(void *arg)
{
	long *n = arg;
	pthread_barrier_wait(&start);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		urcu_memb_synchronize_rcu();
		(*n)++;
	}
	return NULL;
}

static void *deferrer(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	pthread_barrier_wait(&start);
	long i = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct node *p = malloc(sizeof *p);
		if (!p)
			abort();
		p->value = ++i;
		urcu_memb_call_rcu(&p->head, free_node);
	}
	urcu_memb_unregister_thread();
	return NULL;
}

/* T threads of `body` for a second after a common start; returns per second. */
static double on_threads(long threads, void *(*body)(void *), int count_frees)
{
	static long counts[MAX_THREADS];
	pthread_t t[MAX_THREADS];
	idle_start();
	atomic_store(&stop, 0);
	atomic_store(&freed, 0);
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (long i = 0; i < threads; i++) {
		counts[i] = 0;
		pthread_create(&t[i], NULL, body, &counts[i]);
	}
	pthread_barrier_wait(&start);
	double t0 = now_ns();
	usleep(1000000);
	atomic_store(&stop, 1);
	long n = 0;
	for (long i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		n += counts[i];
	}
	if (count_frees) {
		urcu_memb_barrier();
		n = atomic_load(&freed);
	}
	double secs = (now_ns() - t0) / 1e9;
	idle_stop();
	return n / secs;
}

/* test_urcu's shape: READERS threads in tight read loops, one writer calling
 * synchronize_rcu back to back for a second (the writer sleeps on memb's futex, woken
 * by the last reader's unlock). */
static atomic_long urcu_reads;

/* What a section does: nothing but a compiler barrier (rcuref_bench::in_section). */
static inline void in_section(void)
{
	__asm__ volatile("" ::: "memory");
}

static void *urcu_reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	pthread_barrier_wait(&start);
	long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int i = 0; i < 64; i++) {
			urcu_memb_read_lock();
			in_section();
			urcu_memb_read_unlock();
		}
		n += 64;
	}
	atomic_fetch_add_explicit(&urcu_reads, n, memory_order_relaxed);
	urcu_memb_unregister_thread();
	return NULL;
}

static void urcu_row(long readers, double *gps, double *reads)
{
	pthread_t t[MAX_THREADS];
	pthread_barrier_init(&start, NULL, (unsigned)readers + 1);
	for (long i = 0; i < readers; i++)
		pthread_create(&t[i], NULL, urcu_reader, NULL);
	pthread_barrier_wait(&start);
	double t0 = now_ns();
	long n = 0;
	while (now_ns() - t0 < 1e9) {
		urcu_memb_synchronize_rcu();
		n++;
	}
	double secs = (now_ns() - t0) / 1e9;
	atomic_store(&stop, 1);
	for (long i = 0; i < readers; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop, 0);
	*gps = n / secs;
	*reads = atomic_load(&urcu_reads) / secs / readers;
}

/* Ends a row's line: memb's rows say whether membarrier worked (membarrier=0: memb fell
 * back to full fences, benches/liburcu/no_membarrier.c); mb has no such choice. */
static void end_line(void)
{
#ifndef MB_FLAVOUR
	printf(" membarrier=%d", urcu_memb_has_sys_membarrier);
#endif
	printf("\n");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: memb_gp <latency|latency-reader|latency-preempted|read-paced|throughput|defer|urcu|urcu-yield> <threads>\n");
		return 2;
	}
	const char *row = argv[1];
	long threads = atol(argv[2]);
	if (threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "threads must be 1..%d\n", MAX_THREADS);
		return 2;
	}
	double median = 0, p99 = 0;
	const char *unit = "ns";
	if (strcmp(row, "latency") == 0) {
		latency(&median, &p99);
	} else if (strcmp(row, "latency-reader") == 0) {
		latency_reader(&median, &p99);
	} else if (strcmp(row, "latency-preempted") == 0) {
		latency_preempted(threads, &median, &p99);
	} else if (strcmp(row, "read-paced") == 0) {
		double ns = read_paced();
		printf("gp row=%s threads=1 median=%.2f p99=0.0 unit=ns writer=%.0f", row, ns, paced_rate);
		end_line();
		return 0;
	} else if (strcmp(row, "urcu") == 0 || strcmp(row, "urcu-yield") == 0) {
		double gps, reads;
		urcu_row(threads, &gps, &reads);
		printf("gp row=%s threads=%ld median=%.1f p99=0.0 unit=per_s reads=%.0f", row, threads,
		       gps, reads);
		end_line();
		return 0;
	} else if (strcmp(row, "throughput") == 0) {
		median = on_threads(threads, synchronizer, 0);
		unit = "per_s";
	} else if (strcmp(row, "defer") == 0) {
		median = on_threads(threads, deferrer, 1);
		unit = "per_s";
	} else {
		fprintf(stderr, "unknown row %s\n", row);
		return 2;
	}
	printf("gp row=%s threads=%ld median=%.1f p99=%.1f unit=%s", row, threads, median, p99, unit);
	end_line();
	return 0;
}
