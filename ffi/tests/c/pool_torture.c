/*
 * The C pool (`rcuref_pool_*`, SLAB_TYPESAFE_BY_RCU) with threads: LOCATIONS published
 * locations, each naming a pool object whose key is the location's index; writers
 * replace objects (alloc, write the key, publish, exchange, put the old one), so freed
 * objects are reused at once for other locations; readers look a location up with
 * rcuref_pool_lookup inside a read section and must always get an object whose key is
 * that location's, alive (magic LIVE), and still so after their section, while they
 * hold the reference. The pool's destroy poisons an object before its reuse.
 *
 * Usage: pool_torture <milliseconds> [no-recheck]
 * "no-recheck" looks up by hand without the re-check after the get (the negative
 * control, Linus's objection to __get_file_rcu without it): it must be caught (exit 0
 * only if it saw a wrong object).
 */
#define _GNU_SOURCE
#include "annotate.h"
#include "clock.h"
#include "rcuref.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIVE 0x1171u
#define DEAD 0xdeadu
#define LOCATIONS 4
#define OBJECTS 8
#define READERS 2

struct obj {
	unsigned key;
	unsigned magic;
	rcuref_pool_node node;
};

static struct obj objects[OBJECTS];
static rcuref_pool pool;
static void *where[LOCATIONS];
static const rcuref_rcu *d;
static atomic_int stop, wrong;
static atomic_long lookups, found;
static int no_recheck;

static void destroy(void *p)
{
	HB_ACQUIRE(p); /* the last put: every holder's use happened before */
	((struct obj *)p)->magic = DEAD;
	HB_RELEASE(p); /* freed: the next claim's writes happen after */
}

static void put(struct obj *o)
{
	HB_RELEASE(o);
	rcuref_pool_put(&pool, o, NULL);
}

/* The control's lookup: get without the re-check. */
static struct obj *lookup_without_recheck(int loc)
{
	struct obj *o = rcuref_dereference(&where[loc]);
	bool taken = false;
	if (o && rcuref_pool_get(&pool, o, &taken) == RCUREF_OK && taken)
		return o;
	return NULL;
}

static void *reader(void *arg)
{
	uint32_t slot = (uint32_t)(long)arg;
	rcuref_ctx me;
	if (rcuref_ctx_open(d, slot, slot + 1, &me) != RCUREF_OK)
		abort();
	unsigned n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int loc = (int)(n++ % LOCATIONS);
		struct obj *o = NULL;
		rcuref_read_lock(&me);
		if (no_recheck) {
			o = lookup_without_recheck(loc);
		} else if (rcuref_pool_lookup(&pool, &where[loc], (void **)&o) != RCUREF_OK) {
			abort();
		}
		rcuref_read_unlock(&me);
		atomic_fetch_add_explicit(&lookups, 1, memory_order_relaxed);
		if (!o)
			continue;
		HB_ACQUIRE(o); /* a reference taken: publish happened before */
		if (o->key != (unsigned)loc || o->magic != LIVE)
			atomic_fetch_add(&wrong, 1);
		atomic_fetch_add_explicit(&found, 1, memory_order_relaxed);
		put(o);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: pool_torture <milliseconds> [no-recheck]\n");
		return 2;
	}
	double ms = atof(argv[1]);
	no_recheck = argc > 2 && strcmp(argv[2], "no-recheck") == 0;
	d = rcuref_rcu_domain(1);
	if (rcuref_pool_init(&pool, objects, sizeof objects[0], offsetof(struct obj, node),
			     OBJECTS, destroy) != RCUREF_OK)
		return 2;
	pthread_t r[READERS];
	for (long i = 0; i < READERS; i++)
		pthread_create(&r[i], NULL, reader, (void *)(1 + i));
	long replaced = 0, full = 0;
	double end = now_ms() + ms;
	while (now_ms() < end) {
		int loc = (int)(replaced % LOCATIONS);
		struct obj *o;
		if (rcuref_pool_alloc(&pool, (void **)&o) != RCUREF_OK) {
			full++;
			continue;
		}
		HB_ACQUIRE(o);
		o->key = (unsigned)loc;
		o->magic = LIVE;
		HB_RELEASE(o);
		if (rcuref_pool_publish(&pool, o) != RCUREF_OK)
			abort();
		HB_RELEASE(&where[loc]);
		struct obj *old = rcuref_exchange_pointer(&where[loc], o);
		if (old)
			put(old); /* the location's reference: reused at once when it is the last */
		replaced++;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	int w = atomic_load(&wrong);
	printf("pool torture%s: %ld replaced (%ld times full), %ld lookups, %ld found, %d wrong\n",
	       no_recheck ? " (no re-check)" : "", replaced, full, atomic_load(&lookups),
	       atomic_load(&found), w);
	if (no_recheck)
		return w > 0 ? 0 : 1;
	return w == 0 ? 0 : 1;
}
