/*
 * The C API on bare metal in QEMU, built with a GCC cross compiler against
 * librcuref_ffi.a and run through the runner by `cargo xtask ffi`: a Cortex-M4
 * (mps2-an386, thumbv7em-none-eabihf, arm-none-eabi-gcc; start-up in startup.c) and a
 * two-hart RISC-V (virt, riscv64gc-unknown-none-elf, riscv64-unknown-elf-gcc; start-up
 * in ../firmware-riscv/startup.c). The start-up provides the timer interrupt (calling
 * tick()), interrupt masking, output and exit. Contexts, each with its own slot:
 *
 * - the thread (slot 0) publishes a new table over and over and retires the old one
 *   after a grace period, alternately by rcuref_synchronize and by rcuref_call_rcu
 *   (running the queue itself); it also reads the object the interrupt publishes,
 *   inside read sections that the interrupt can preempt at any instruction;
 * - the timer interrupt (slot 1) reads the table in a section, and every fourth tick
 *   replaces its own object and hands the old one to rcuref_call_rcu **from the
 *   interrupt handler**;
 * - on RISC-V, the second hart (slot 2) reads the table in sections all along, on
 *   another core (QEMU runs harts on host threads).
 *
 * Retired objects are poisoned (magic DEAD) and reused, so a reader that meets one
 * sees it. Built with -DBROKEN, the interrupt frees its old object at once instead of
 * by call_rcu: the thread's reader must then be caught reading a poisoned object (the
 * negative control). main returns 0 when the checks passed (BROKEN: a violation was
 * seen).
 */
#include "rcuref.h"
#include <stdint.h>

/* From the start-up. */
void sh_puts(const char *s);
uint32_t irq_mask(void);
void irq_unmask(uint32_t was);
void timer_start(void);
void timer_stop(void);

#define LIVE 0x1171u
#define DEAD 0xdeadu
#define SLOT_THREAD 0
#define SLOT_IRQ 1
#define SLOT_HART1 2
#define OBJS 8

struct obj {
	volatile uint32_t magic;
	volatile uint32_t version;
};

static const rcuref_rcu *d;
/* One context per reader: the thread, the timer interrupt, the second hart. */
static rcuref_ctx ctx_thread, ctx_irq, ctx_hart1;
static void *table, *irq_obj;
static struct obj tables[OBJS], irq_objs[OBJS];
static volatile uint32_t table_free = (1u << OBJS) - 1, irq_free = (1u << OBJS) - 1;
static volatile uint32_t ticks, irq_reads, irq_call_rcu, irq_full, violations;
static volatile uint32_t thread_reads, by_callback;

/* A free object of a pool (bit set: free), with interrupts masked around the bitmap. */
static struct obj *take(struct obj *pool, volatile uint32_t *free_bits)
{
	uint32_t m = irq_mask();
	struct obj *o = 0;
	for (int i = 0; i < OBJS; i++)
		if (*free_bits & (1u << i)) {
			*free_bits &= ~(1u << i);
			o = &pool[i];
			break;
		}
	irq_unmask(m);
	return o;
}

static void give_back(struct obj *pool, volatile uint32_t *free_bits, struct obj *o)
{
	o->magic = DEAD;
	uint32_t m = irq_mask();
	*free_bits |= 1u << (o - pool);
	irq_unmask(m);
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

/* The timer interrupt's work (called by the start-up's handler). */
void tick(void)
{
	ticks++;
	rcuref_read_lock(&ctx_irq);
	const struct obj *t = rcuref_dereference(&table);
	if (t && t->magic != LIVE)
		__atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
	irq_reads++;
	rcuref_read_unlock(&ctx_irq);

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

#ifdef SECOND_HART
static volatile uint32_t stop_hart1, hart1_done, hart1_reads;

/* The second hart: a reader of the table on another core, until main stops it. */
void hart1_main(void)
{
	while (!__atomic_load_n(&d, __ATOMIC_ACQUIRE))
		;
	while (!__atomic_load_n(&stop_hart1, __ATOMIC_RELAXED)) {
		rcuref_read_lock(&ctx_hart1);
		const struct obj *t = rcuref_dereference(&table);
		for (volatile int spin = 0; spin < 10; spin++)
			if (t && t->magic != LIVE)
				__atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
		rcuref_read_unlock(&ctx_hart1);
		hart1_reads++;
	}
	__atomic_store_n(&hart1_done, 1, __ATOMIC_RELEASE);
}
#endif

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

static void count_call(void *arg)
{
	(*(volatile uint32_t *)arg)++;
}

/* Linux's grace-period calls on the target (issue 28): get_state is start_poll's
 * cookie, the completed cookie is done, cond_synchronize returns at once for a done
 * cookie inside a section and refuses an unfinished one there, a budgeted run leaves
 * the rest, a token holds grace periods until up_read. 1 when every check held. */
static int linux_calls(void)
{
	rcuref_cookie a, b, done, c;
	bool is_done = false;
	volatile uint32_t ran = 0;
	uint32_t left = 0;
	rcuref_read_token t;
	if (rcuref_get_state(d, &a) != RCUREF_OK || rcuref_start_poll(d, &b) != RCUREF_OK ||
	    !rcuref_same_state(a, b) || rcuref_get_completed(d, &done) != RCUREF_OK)
		return 0;
	if (rcuref_poll(d, done, &is_done) != RCUREF_OK || !is_done)
		return 0;
	if (rcuref_poll(d, a, &is_done) != RCUREF_OK || !is_done)
		return 0;
	rcuref_read_lock(&ctx_thread);
	int inside_done = rcuref_cond_synchronize(&ctx_thread, a, 0, 0) == RCUREF_OK;
	rcuref_get_state(d, &c);
	int inside_new = rcuref_cond_synchronize(&ctx_thread, c, 0, 0) == RCUREF_EINSECTION;
	rcuref_read_unlock(&ctx_thread);
	if (!inside_done || !inside_new || rcuref_cond_synchronize(&ctx_thread, c, 0, 0) != RCUREF_OK)
		return 0;
	for (int i = 0; i < 3; i++)
		if (rcuref_call_rcu(d, count_call, (void *)&ran) != RCUREF_OK)
			return 0;
	if (rcuref_synchronize(&ctx_thread, 0, 0) != RCUREF_OK)
		return 0;
	if (rcuref_call_rcu_run_some(&ctx_thread, 2, &left) != 2 || left != 1 || ran != 2)
		return 0;
	if (rcuref_rcu_barrier(&ctx_thread, 0, 0) != RCUREF_OK || ran != 3)
		return 0;
	if (rcuref_down_read(d, &t) != RCUREF_OK || rcuref_get_state(d, &c) != RCUREF_OK)
		return 0;
	for (int i = 0; i < 10; i++)
		if (rcuref_poll(d, c, &is_done) != RCUREF_OK || is_done)
			return 0;
	if (rcuref_up_read(&t) != RCUREF_OK || rcuref_poll(d, c, &is_done) != RCUREF_OK || !is_done)
		return 0;
	return 1;
}

int main(void)
{
	const rcuref_rcu *dom = rcuref_rcu_domain(0);
	if (!dom)
		return 1;
	if (rcuref_ctx_open(dom, SLOT_THREAD, 1, &ctx_thread) != RCUREF_OK ||
	    rcuref_ctx_open(dom, SLOT_IRQ, 2, &ctx_irq) != RCUREF_OK ||
	    rcuref_ctx_open(dom, SLOT_HART1, 3, &ctx_hart1) != RCUREF_OK)
		return 1;
	/* Release: the second hart reads its context after it sees `d`. */
	__atomic_store_n(&d, dom, __ATOMIC_RELEASE);
	timer_start();

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
				} else if (rcuref_synchronize(&ctx_thread, 0, 0) == RCUREF_OK) {
					give_back(tables, &table_free, old);
				} else {
					return 1;
				}
			}
		}
		/* The thread reads what the interrupt publishes; the interrupt may preempt it
		 * anywhere in here, replace the object and queue the old one. */
		rcuref_read_lock(&ctx_thread);
		const struct obj *o = rcuref_dereference(&irq_obj);
		for (volatile int spin = 0; spin < 20; spin++)
			if (o && o->magic != LIVE)
				__atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
		thread_reads++;
		rcuref_read_unlock(&ctx_thread);
		rcuref_call_rcu_run(&ctx_thread);
	}
	timer_stop();
#ifdef SECOND_HART
	__atomic_store_n(&stop_hart1, 1, __ATOMIC_RELAXED);
	while (!__atomic_load_n(&hart1_done, __ATOMIC_ACQUIRE))
		;
#endif
	if (rcuref_rcu_barrier(&ctx_thread, 0, 0) != RCUREF_OK)
		return 1;
	if (!linux_calls()) {
		sh_puts("c firmware: Linux's grace-period calls FAILED\n");
		return 1;
	}

	put_u32("c firmware: tables published ", published);
	put_u32(", interrupts ", ticks);
	put_u32(", interrupt reads ", irq_reads);
	put_u32(", call_rcu from the interrupt ", irq_call_rcu);
	put_u32(" (full ", irq_full);
	put_u32("), callbacks run ", by_callback);
	put_u32(", thread reads ", thread_reads);
#ifdef SECOND_HART
	put_u32(", second hart's reads ", hart1_reads);
#endif
	put_u32(", violations ", violations);
	sh_puts("; Linux's grace-period calls held\n");
#ifdef BROKEN
	return violations > 0 ? 0 : 1;
#else
	int ok = violations == 0 && irq_call_rcu > 0 && by_callback > 0 && irq_reads > 0;
#ifdef SECOND_HART
	ok = ok && hart1_reads > 0;
#endif
	return ok ? 0 : 1;
#endif
}
