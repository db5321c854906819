/*
 * The C API on a Cortex-M4 in QEMU (mps2-an386), built with arm-none-eabi-gcc against
 * librcuref_ffi.a for thumbv7em-none-eabihf and run through the runner by `cargo xtask
 * ffi`. Two contexts on one core, each with its own slot:
 *
 * - the thread (slot 0) publishes a new table over and over and retires the old one
 *   after a grace period, alternately by rcuref_synchronize and by rcuref_call_rcu
 *   (running the queue itself); it also reads the object the interrupt publishes,
 *   inside read sections that the interrupt can preempt at any instruction;
 * - the SysTick interrupt (slot 1) reads the table in a section, and every fourth tick
 *   replaces its own object and hands the old one to rcuref_call_rcu **from the
 *   interrupt handler**.
 *
 * Retired objects are poisoned (magic DEAD) and reused, so a reader that meets one
 * sees it. Built with -DBROKEN, the interrupt frees its old object at once instead of
 * by call_rcu: the thread's reader must then be caught reading a poisoned object (the
 * negative control). Exit status 0: the checks passed (BROKEN: a violation was seen).
 */
#include "rcuref.h"
#include <stdint.h>

void sh_puts(const char *s);

#define LIVE 0x1171u
#define DEAD 0xdeadu
#define SLOT_THREAD 0
#define SLOT_IRQ 1
#define OBJS 8

struct obj {
	volatile uint32_t magic;
	volatile uint32_t version;
};

static const rcuref_rcu *d;
static void *table, *irq_obj;
static struct obj tables[OBJS], irq_objs[OBJS];
static volatile uint32_t table_free = (1u << OBJS) - 1, irq_free = (1u << OBJS) - 1;
static volatile uint32_t ticks, irq_reads, irq_call_rcu, irq_full, violations;
static volatile uint32_t thread_reads, by_callback;

static uint32_t mask(void)
{
	uint32_t m;
	__asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(m)::"memory");
	return m;
}

static void unmask(uint32_t m)
{
	if (!(m & 1))
		__asm__ volatile("cpsie i" ::: "memory");
}

/* A free object of a pool (bit set: free), with interrupts masked around the bitmap. */
static struct obj *take(struct obj *pool, volatile uint32_t *free_bits)
{
	uint32_t m = mask();
	struct obj *o = 0;
	for (int i = 0; i < OBJS; i++)
		if (*free_bits & (1u << i)) {
			*free_bits &= ~(1u << i);
			o = &pool[i];
			break;
		}
	unmask(m);
	return o;
}

static void give_back(struct obj *pool, volatile uint32_t *free_bits, struct obj *o)
{
	o->magic = DEAD;
	uint32_t m = mask();
	*free_bits |= 1u << (o - pool);
	unmask(m);
}

static void retire_table(void *o)
{
	by_callback++;
	give_back(tables, &table_free, o);
}

__attribute__((unused)) static void retire_irq_obj(void *o)
{
	by_callback++;
	give_back(irq_objs, &irq_free, o);
}

void systick_handler(void)
{
	ticks++;
	rcuref_read_lock(d, SLOT_IRQ);
	const struct obj *t = rcuref_dereference(&table);
	if (t && t->magic != LIVE)
		violations++;
	irq_reads++;
	rcuref_read_unlock(d, SLOT_IRQ);

	if (ticks % 4 == 0) {
		struct obj *o = take(irq_objs, &irq_free);
		if (o) {
			o->magic = LIVE;
			o->version = ticks;
			struct obj *old = rcuref_exchange_pointer(&irq_obj, o);
#ifdef BROKEN
			if (old)
				give_back(irq_objs, &irq_free, old); /* no grace period */
#else
			if (old && rcuref_call_rcu(d, retire_irq_obj, old) == RCUREF_EFULL) {
				/* An interrupt cannot wait: put the new one back and keep the old. */
				irq_full++;
				rcuref_exchange_pointer(&irq_obj, old);
				give_back(irq_objs, &irq_free, o);
			} else if (old) {
				irq_call_rcu++;
			}
#endif
		}
	}
}

static void put_u32(const char *label, uint32_t v)
{
	char buf[16];
	int i = 15;
	buf[i] = 0;
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v && i > 0);
	sh_puts(label);
	sh_puts(&buf[i]);
}

int main(void)
{
	d = rcuref_rcu_domain(0);
	if (!d)
		return 1;
	/* SysTick: every 2000 cycles, from the core clock. */
	*(volatile uint32_t *)0xE000E014 = 2000 - 1; /* reload */
	*(volatile uint32_t *)0xE000E018 = 0;        /* current */
	*(volatile uint32_t *)0xE000E010 = 7;        /* enable, interrupt, core clock */

	uint32_t published = 0;
	while (ticks < 4000) {
		struct obj *t = take(tables, &table_free);
		if (t) {
			t->magic = LIVE;
			t->version = ++published;
			struct obj *old = rcuref_exchange_pointer(&table, t);
			if (old) {
				if (published % 2 == 0 &&
				    rcuref_call_rcu(d, retire_table, old) == RCUREF_OK) {
					/* freed by the queue */
				} else if (rcuref_synchronize(d, SLOT_THREAD, 0, 0) == RCUREF_OK) {
					give_back(tables, &table_free, old);
				} else {
					return 1;
				}
			}
		}
		/* The thread reads what the interrupt publishes; the interrupt may preempt it
		 * anywhere in here, replace the object and queue the old one. */
		rcuref_read_lock(d, SLOT_THREAD);
		const struct obj *o = rcuref_dereference(&irq_obj);
		for (volatile int spin = 0; spin < 20; spin++)
			if (o && o->magic != LIVE)
				violations++;
		thread_reads++;
		rcuref_read_unlock(d, SLOT_THREAD);
		rcuref_call_rcu_run(d);
	}
	*(volatile uint32_t *)0xE000E010 = 0;
	if (rcuref_rcu_barrier(d, SLOT_THREAD, 0, 0) != RCUREF_OK)
		return 1;

	put_u32("c firmware: tables published ", published);
	put_u32(", interrupts ", ticks);
	put_u32(", interrupt reads ", irq_reads);
	put_u32(", call_rcu from the interrupt ", irq_call_rcu);
	put_u32(" (full ", irq_full);
	put_u32("), callbacks run ", by_callback);
	put_u32(", thread reads ", thread_reads);
	put_u32(", violations ", violations);
	sh_puts("\n");
#ifdef BROKEN
	return violations > 0 ? 0 : 1;
#else
	return violations == 0 && irq_call_rcu > 0 && by_callback > 0 && irq_reads > 0 ? 0 : 1;
#endif
}
