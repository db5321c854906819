/*
 * Runs docs/c-api.md's example (example.c, included as written) on the host: a thread
 * plays the receive interrupt, another the idle task, main the control task. Built
 * with AddressSanitizer by `cargo xtask test`, so a table freed while the interrupt
 * still reads it is a reported use-after-free. Every route the interrupt sees must be
 * one that some table published: hop == version * 7.
 */
#define _GNU_SOURCE
#include "example.c"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

void rtos_yield(void)
{
	sched_yield();
}

static atomic_int stop;
static atomic_long routed, bad;

static void *rx_irq(void *arg)
{
	(void)arg;
	uint32_t dst = 0;
	while (!atomic_load(&stop)) {
		uint32_t hop = rx_irq_route(dst++ % ROUTES);
		if (hop % 7 != 0)
			atomic_fetch_add(&bad, 1);
		atomic_fetch_add(&routed, 1);
	}
	return NULL;
}

static void *idle_task(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		routes_housekeeping();
	return NULL;
}

int main(void)
{
	if (routes_init() != 0) {
		fprintf(stderr, "example: no domain\n");
		return 1;
	}
	pthread_t irq, idle;
	pthread_create(&irq, NULL, rx_irq, NULL);
	pthread_create(&idle, NULL, idle_task, NULL);
	uint32_t v;
	for (v = 1; v <= 100000; v++)
		if (routes_update(v, v * 7) != 0) {
			fprintf(stderr, "example: update %u failed\n", v);
			return 1;
		}
	atomic_store(&stop, 1);
	pthread_join(irq, NULL);
	pthread_join(idle, NULL);
	if (routes_shutdown() != 0)
		return 1;
	printf("example: %u tables published, %ld routes looked up, %ld wrong\n", v - 1,
	       atomic_load(&routed), atomic_load(&bad));
	return atomic_load(&bad) == 0 ? 0 : 1;
}
