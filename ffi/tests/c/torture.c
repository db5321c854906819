/*
 * A torture of the C API with threads: readers look up a published object inside read
 * sections and sometimes keep it past the section with a reference; a writer replaces
 * it over and over and retires the old one after a grace period, by rcuref_synchronize
 * or by rcuref_call_rcu (a runner thread runs the queue). Objects are recycled through
 * a free list, never returned to malloc, so a reader that meets a recycled object reads
 * valid memory and sees it: its magic is DEAD, or its sequence number changes under it.
 *
 * Usage: torture <milliseconds> [broken]
 * "broken" retires objects without waiting for a grace period: the negative control,
 * which must be caught (exit 0 only if it saw a violation).
 *
 * Built with -DHEAVY_INSTALL (against an archive with the feature auto-fence), it first
 * installs membarrier as the heavy fence (rcuref_heavy_install), so that its readers run
 * with only a compiler barrier and its grace periods with the heavy fence.
 */
#define _GNU_SOURCE
#include "annotate.h"
#include "clock.h"
#include "rcuref.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HEAVY_INSTALL
#include "membarrier_fence.h"
#endif

#define LIVE 0x1171u
#define DEAD 0xdeadu
#define READERS 3

struct obj {
	unsigned magic;
	unsigned seq;
	rcuref_fileref32 ref;
	struct obj *next_free;
};

static const rcuref_rcu *d;
static void *cur;
static atomic_int stop, violations;
static atomic_long reads, kept, retired, by_callback;
static int broken;

static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static struct obj *free_list;
static unsigned next_seq;

static struct obj *obj_new(void)
{
	pthread_mutex_lock(&free_lock);
	struct obj *o = free_list;
	if (o)
		free_list = o->next_free;
	unsigned seq = ++next_seq;
	pthread_mutex_unlock(&free_lock);
	if (!o && !(o = calloc(1, sizeof *o)))
		abort();
	o->seq = seq;
	o->magic = LIVE;
	rcuref_fileref32_init(&o->ref, 1); /* the table's reference; last, after the fields */
	return o;
}

/* The last reference is gone: poison it and put it on the free list. */
static void obj_recycle(struct obj *o)
{
	o->magic = DEAD;
	pthread_mutex_lock(&free_lock);
	o->next_free = free_list;
	free_list = o;
	pthread_mutex_unlock(&free_lock);
	atomic_fetch_add(&retired, 1);
}

static void obj_put(struct obj *o)
{
	HB_RELEASE(&o->ref);
	if (rcuref_fileref32_put(&o->ref)) {
		HB_ACQUIRE(&o->ref);
		obj_recycle(o);
	}
}

static void retire_cb(void *arg)
{
	HB_ACQUIRE(arg); /* the queueing happened before the run */
	HB_ACQUIRE(d);   /* after a grace period: every section before it has ended */
	atomic_fetch_add(&by_callback, 1);
	obj_put(arg);
}

static void check(const struct obj *o, unsigned seq)
{
	if (o->magic != LIVE || o->seq != seq)
		atomic_fetch_add(&violations, 1);
}

static void *reader(void *arg)
{
	uint32_t slot = (uint32_t)(long)arg;
	rcuref_ctx me;
	if (rcuref_ctx_open(d, slot, slot + 1, &me) != RCUREF_OK)
		abort();
	unsigned n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (rcuref_read_lock(&me) != RCUREF_OK)
			abort();
		struct obj *o = rcuref_dereference(&cur);
		HB_ACQUIRE(&cur);
		unsigned seq = o->seq;
		check(o, seq);
		int keep = (++n % 8 == 0) && rcuref_fileref32_get(&o->ref);
		for (volatile int spin = 0; spin < 50; spin++)
			;
		check(o, seq);
		HB_RELEASE(d);
		if (rcuref_read_unlock(&me) != RCUREF_OK)
			abort();
		if (keep) { /* still ours, outside the section, by its reference */
			check(o, seq);
			atomic_fetch_add(&kept, 1);
			obj_put(o);
		}
		atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
	}
	return NULL;
}

static void *runner(void *arg)
{
	(void)arg;
	rcuref_ctx me; /* slot 1: the queue's runner */
	if (rcuref_ctx_open(d, 1, 2, &me) != RCUREF_OK)
		abort();
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		if (rcuref_call_rcu_run(&me) < 0)
			abort();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: torture <milliseconds> [broken]\n");
		return 2;
	}
	double ms = atof(argv[1]);
	broken = argc > 2 && strcmp(argv[2], "broken") == 0;
#ifdef HEAVY_INSTALL
	if (membarrier_register() != 0 || rcuref_heavy_install(membarrier_fence) != RCUREF_OK ||
	    rcuref_fence_mode() != RCUREF_FENCE_HEAVY) {
		fprintf(stderr, "torture: the heavy fence could not be installed\n");
		return 2;
	}
#endif
	d = rcuref_rcu_domain(0);
	if (!d || rcuref_rcu_slots(d) < 2 + READERS) {
		fprintf(stderr, "torture: needs a domain with %d slots\n", 2 + READERS);
		return 2;
	}
	struct obj *first = obj_new();
	HB_RELEASE(&cur);
	rcuref_assign_pointer(&cur, first);

	pthread_t r[READERS], run;
	for (long i = 0; i < READERS; i++)
		pthread_create(&r[i], NULL, reader, (void *)(2 + i));
	pthread_create(&run, NULL, runner, NULL);

	/* The writer: slot 0. */
	rcuref_ctx w;
	if (rcuref_ctx_open(d, 0, 1, &w) != RCUREF_OK)
		abort();
	long replaced = 0, full = 0;
	double end = now_ms() + ms;
	while (now_ms() < end) {
		struct obj *o = obj_new();
		HB_RELEASE(&cur);
		struct obj *old = rcuref_exchange_pointer(&cur, o);
		replaced++;
		if (broken) {
			obj_put(old); /* no grace period: readers may still be inside */
		} else if (replaced % 2) {
			if (rcuref_synchronize(&w, NULL, NULL) != RCUREF_OK)
				abort();
			HB_ACQUIRE(d);
			obj_put(old);
		} else if ((HB_RELEASE(old), rcuref_call_rcu(d, retire_cb, old)) == RCUREF_EFULL) {
			full++;
			if (rcuref_synchronize(&w, NULL, NULL) != RCUREF_OK)
				abort();
			HB_ACQUIRE(d);
			obj_put(old);
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	pthread_join(run, NULL);
	if (rcuref_rcu_barrier(&w, NULL, NULL) != RCUREF_OK)
		abort();
	HB_ACQUIRE(d);
	int v = atomic_load(&violations);
	printf("torture%s: %ld replaced (%ld freed by call_rcu, %ld times full), %ld reads, "
	       "%ld kept past their section, %ld recycled, %d violations\n",
	       broken ? " (broken: no grace period)" : "", replaced, atomic_load(&by_callback),
	       full, atomic_load(&reads), atomic_load(&kept), atomic_load(&retired), v);
#ifdef HEAVY_INSTALL
	printf("torture: heavy fences: %ld\n", atomic_load(&heavy_fences));
	if (!broken && atomic_load(&heavy_fences) == 0) {
		fprintf(stderr, "torture: no grace period called the installed fence\n");
		return 1;
	}
#endif
	if (rcuref_call_rcu_pending(d) != 0) {
		fprintf(stderr, "torture: callbacks left after the barrier\n");
		return 1;
	}
	if (broken)
		return v > 0 ? 0 : 1;
	return v == 0 ? 0 : 1;
}
