/*
 * An RTOS-shaped use of rcuref's C API (docs/c-api.md shows this file): a routing
 * table that a control task replaces while the receive interrupt looks routes up.
 * The interrupt never blocks and never takes a lock; the old table is freed after a
 * grace period by call_rcu, or by waiting when the queue is full.
 */
#include "rcuref.h"
#include <stdint.h>
#include <stdlib.h> /* malloc and free stand in for the RTOS's allocator */

/* One reader slot per context that reads or waits: a task, an interrupt priority
 * level. Each is opened once at start-up, with an owner number that names that
 * context and no other. */
enum { SLOT_CONTROL_TASK = 0, SLOT_RX_IRQ = 1, SLOT_IDLE_TASK = 2 };

#define ROUTES 16

struct route_table {
	uint32_t version;
	uint32_t next_hop[ROUTES];
};

static const rcuref_rcu *rcu;
static rcuref_ctx control_task_ctx, rx_irq_ctx, idle_task_ctx;
static void *table; /* the published struct route_table * */

int routes_init(void)
{
	rcu = rcuref_rcu_domain(0);
	if (rcuref_ctx_open(rcu, SLOT_CONTROL_TASK, 1, &control_task_ctx) != RCUREF_OK ||
	    rcuref_ctx_open(rcu, SLOT_RX_IRQ, 2, &rx_irq_ctx) != RCUREF_OK ||
	    rcuref_ctx_open(rcu, SLOT_IDLE_TASK, 3, &idle_task_ctx) != RCUREF_OK)
		return -1;
	return 0;
}

/* In the receive interrupt handler: the next hop for `dst`, 0 if none. */
uint32_t rx_irq_route(uint32_t dst)
{
	uint32_t hop = 0;
	if (rcuref_read_lock(&rx_irq_ctx) != RCUREF_OK)
		return 0; /* not in a section: read nothing */
	const struct route_table *t = rcuref_dereference(&table);
	if (t && dst < ROUTES)
		hop = t->next_hop[dst];
	rcuref_read_unlock(&rx_irq_ctx);
	return hop;
}

static void free_table(void *old)
{
	free(old);
}

/* The control task's wait hook: yield to other tasks between attempts. */
extern void rtos_yield(void);
static int yield_hook(void *ctx, uint32_t attempts)
{
	(void)ctx;
	(void)attempts;
	rtos_yield();
	return 0; /* keep waiting */
}

/* In the control task: publish a new table (every route via `hop`). */
int routes_update(uint32_t version, uint32_t hop)
{
	struct route_table *t = malloc(sizeof *t);
	if (!t)
		return -1;
	t->version = version;
	for (int i = 0; i < ROUTES; i++)
		t->next_hop[i] = hop;
	void *old = rcuref_exchange_pointer(&table, t); /* readers now find t */
	if (!old)
		return 0;
	if (rcuref_call_rcu(rcu, free_table, old) == RCUREF_EFULL) {
		/* No room in the queue: wait for the readers, then free it here. */
		if (rcuref_synchronize(&control_task_ctx, yield_hook, NULL) != RCUREF_OK)
			return -1;
		free(old);
	}
	return 0;
}

/* From the idle task or a timer: free the old tables whose readers are gone. */
void routes_housekeeping(void)
{
	(void)rcuref_call_rcu_run(&idle_task_ctx); /* how many ran; the next call runs the rest */
}

/* At shutdown, from the control task: free every table still queued. */
int routes_shutdown(void)
{
	void *last = rcuref_exchange_pointer(&table, NULL);
	/* The barrier waits for a grace period that began after this unpublish, so the
	 * last table has no readers left either when it returns. */
	if (rcuref_rcu_barrier(&control_task_ctx, yield_hook, NULL) != RCUREF_OK)
		return -1;
	free(last);
	return 0;
}
