/*
 * rcuref's C API in a FreeRTOS application (docs/c-api.md, "On an RTOS"), on QEMU's
 * mps2-an385 (Cortex-M3) and mps2-an386 (Cortex-M4F); `cargo xtask ffi` runs it.
 *
 * An fd table (FDS published pointers to struct file, each with an rcuref_fileref32
 * count; the table holds one reference) is read by four tasks at priorities 1, 2, 3
 * and 5 and by three interrupt handlers: the SysTick hook (vApplicationTickHook),
 * TIMER0 (inside configMAX_SYSCALL_INTERRUPT_PRIORITY) and TIMER1 (above it, never
 * masked by the kernel). The handlers nest their sections on the context of the task
 * they interrupted, found through rcuref_set_current_context and a pointer that
 * traceTASK_SWITCHED_IN updates. A writer task (priority 4) replaces entries 0-5 and
 * drops the table's reference after a grace period: by rcuref_call_rcu, or by
 * rcuref_synchronize with a wait hook that sleeps a tick (a taskYIELD() hook would
 * never let the lower-priority readers finish their sections). TIMER0 and the tick
 * hook replace entries of their own (6 and 7) and queue the old ones with
 * rcuref_call_rcu. The idle hook and the writer run the queue. A reader that holds a
 * reference past its section and puts the last one frees the object at once: nobody
 * can reach it without a reference once the table's is dropped after a grace period.
 *
 * Every freed object is poisoned; a reader that meets a poisoned object, or one that
 * is not the fd it looked up, counts a violation. At the end the counts go out over
 * semihosting and main's task exits 0 if there was no violation and enough work was
 * done. Built with -DBROKEN, the writer task drops the table's reference at once (no
 * grace period): the readers it preempts must then meet poisoned objects, and it exits
 * 0 only if they did (the negative control).
 */
#include "FreeRTOS.h"
#include "task.h"

#include "rcuref.h"
#include "rcuref_config.h"

#include <stdatomic.h>
#include <stdint.h>

/* From the start-up. */
void sh_puts(const char *s);
void sh_exit(int ok);

/* One reader slot per task that reads or waits; the interrupt handlers use the slot
 * of the task they interrupt. */
enum { READERS = 4, SLOT_WRITER = READERS, SLOT_IDLE, SLOT_MAIN, SLOTS_USED };
_Static_assert(RCUREF_FFI_SLOTS >= SLOTS_USED, "one reader slot per task");

#define FDS 8
#define WRITER_FDS 6 /* fds 0-5; 6 is TIMER0's, 7 the tick hook's */
#define FD_TIMER0 6
#define FD_TICK 7
#define FILES 96
#define LIVE 0x4c495645u
#define POISON 0xdeadbeefu
#define RUN_TICKS 3000 /* 3 s of FreeRTOS ticks */
#define DWELL 40      /* spins between a reader's load and its checks */

struct file {
	rcuref_fileref32 ref;
	uint32_t magic; /* LIVE, POISON once freed */
	uint32_t fd;
	uint32_t gen;
	uint32_t data[4]; /* gen ^ i */
	atomic_uint used;
};

static const rcuref_rcu *rcu;
static rcuref_ctx ctxs[SLOTS_USED]; /* each task's own, found by its TLS pointer 0 */
static void *fdt[FDS];              /* the published struct file * */
static struct file files[FILES];
static atomic_uint cursor;
static volatile int stop;
static volatile int parked[SLOTS_USED];

/* The context an interrupt handler nests on: the running task's. */
static const rcuref_ctx *volatile current_ctx;

static atomic_uint violations, errors, sections, isr_sections, isr_no_ctx, refs,
	last_puts_by_readers, grace_periods, callbacks, queued, queued_from_isr, isr_full,
	replaced, frees, alloc_failures;

static void count(atomic_uint *c, unsigned n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- objects ---- */

static struct file *file_alloc(uint32_t fd, uint32_t gen)
{
	for (unsigned n = 0; n < FILES; n++) {
		unsigned i = atomic_fetch_add_explicit(&cursor, 1, memory_order_relaxed) % FILES;
		struct file *f = &files[i];
		unsigned expect = 0;
		if (atomic_compare_exchange_strong_explicit(&f->used, &expect, 1,
							    memory_order_acquire,
							    memory_order_relaxed)) {
			f->magic = LIVE;
			f->fd = fd;
			f->gen = gen;
			for (unsigned k = 0; k < 4; k++)
				f->data[k] = gen ^ k;
			/* The table's reference; a release store, after the fields. */
			rcuref_fileref32_init(&f->ref, 1);
			return f;
		}
	}
	count(&alloc_failures, 1);
	return NULL;
}

/* Poisons and frees: from a callback, a reader's last put, or (BROKEN) the writer. */
static void file_free(struct file *f)
{
	f->magic = POISON;
	f->fd = POISON;
	f->gen = POISON;
	for (unsigned k = 0; k < 4; k++)
		f->data[k] = POISON;
	count(&frees, 1);
	atomic_store_explicit(&f->used, 0, memory_order_release);
}

static void file_put(struct file *f)
{
	if (rcuref_fileref32_put(&f->ref))
		file_free(f);
}

/* Whether `f` is a live file for `fd` (volatile loads: the broken build races). */
static int file_ok(const struct file *f, uint32_t fd)
{
	const volatile struct file *v = f;
	uint32_t gen = v->gen;
	if (v->magic != LIVE || v->fd != fd)
		return 0;
	for (unsigned k = 0; k < 4; k++)
		if (v->data[k] != (gen ^ k))
			return 0;
	return 1;
}

static void spin(unsigned n)
{
	for (volatile unsigned i = 0; i < n; i++)
		;
}

/* The call_rcu callback: the table's reference, dropped after a grace period. */
static void drop_table_ref(void *arg)
{
	count(&callbacks, 1);
	file_put(arg);
}

/* Inside a section: looks `fd` up and checks what it finds; returns it with a
 * reference taken (to be checked and put after the section), or null. */
static struct file *lookup(uint32_t fd, unsigned dwell)
{
	struct file *f = rcuref_dereference(&fdt[fd]);
	if (!f)
		return NULL;
	spin(dwell);
	if (!file_ok(f, fd)) {
		count(&violations, 1);
		return NULL;
	}
	return rcuref_fileref32_get(&f->ref) ? f : NULL;
}

/* After the section: the reference keeps it alive; the last put frees it at once. */
static void use_and_put(struct file *f, uint32_t fd)
{
	if (!file_ok(f, fd))
		count(&violations, 1);
	count(&refs, 1);
	if (rcuref_fileref32_put(&f->ref)) {
		count(&last_puts_by_readers, 1);
		file_free(f);
	}
}

static uint32_t xorshift(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* ---- contexts ---- */

/* The function rcuref_rcu_read_lock() asks for the calling context's context. */
static const rcuref_ctx *current_context(void)
{
	return current_ctx;
}

/* traceTASK_SWITCHED_IN (FreeRTOSConfig.h): the task now running. */
void app_task_switched_in(void)
{
	current_ctx = pvTaskGetThreadLocalStoragePointer(NULL, 0);
}

/* Each task opens its own slot, with its handle as the owner. */
static const rcuref_ctx *open_own_context(uint32_t slot)
{
	if (rcuref_ctx_open(rcu, slot, (size_t)xTaskGetCurrentTaskHandle(), &ctxs[slot]) !=
	    RCUREF_OK) {
		count(&errors, 1);
		return NULL;
	}
	vTaskSetThreadLocalStoragePointer(NULL, 0, &ctxs[slot]);
	current_ctx = &ctxs[slot]; /* switched in before it had one */
	return &ctxs[slot];
}

/* Between a wait's attempts: sleep a tick, so that lower-priority readers run; give
 * up after 10 s. */
static int sleep_hook(void *hook_ctx, uint32_t attempts)
{
	(void)hook_ctx;
	vTaskDelay(1);
	return attempts > 10000;
}

/* ---- the writer's sleep: woken by the last reader's unlock (rcuref_set_sleep) ---- */

static TaskHandle_t writer_handle;
static atomic_uint sleeps, woken_sleeps;
/* Set while TIMER1's handler runs: above configMAX_SYSCALL_INTERRUPT_PRIORITY it may not
 * call the kernel, so its unlocks send no wake (the sleep's one-tick bound covers it). */
static volatile int in_timer1;

/* A sleep ends at the writer's notification or after a tick (the bound a sleep needs:
 * an unlock can miss a wait just falling asleep). A notification sent before it began
 * is remembered, so it is not lost. */
static void rcu_sleep(void *ctx)
{
	(void)ctx;
	count(&sleeps, 1);
	if (ulTaskNotifyTake(pdTRUE, 1) > 0)
		count(&woken_sleeps, 1);
}

/* Called by a reader's outermost unlock when a wait may be asleep: a task's, or an
 * interrupt handler's within the syscall priority. */
static void rcu_wake(void)
{
#ifndef NO_WAKE
	if (!writer_handle || in_timer1)
		return;
	if (xPortIsInsideInterrupt()) {
		BaseType_t woken = pdFALSE;
		vTaskNotifyGiveFromISR(writer_handle, &woken);
		portYIELD_FROM_ISR(woken);
	} else {
		xTaskNotifyGive(writer_handle);
	}
#endif
}

#ifndef BROKEN
/* The writer's wait hook: give up after 10 s; between attempts the domain's sleep runs
 * (after 4 polls), not a tick's delay. */
static int give_up_hook(void *hook_ctx, uint32_t attempts)
{
	(void)hook_ctx;
	return attempts > 100000;
}
#endif

/* ---- the writers ---- */

/* A task's way to retire the table's reference of `old`, unpublished. */
static void retire(const rcuref_ctx *ctx, struct file *old, int wait)
{
#ifdef BROKEN
	(void)ctx;
	(void)wait;
	file_put(old); /* no grace period: the bug the checker must catch */
#else
	if (!wait && rcuref_call_rcu(rcu, drop_table_ref, old) == RCUREF_OK) {
		count(&queued, 1);
		return;
	}
	/* Every 8th, or the queue is full: wait for the readers (asleep between polls,
	 * woken by the last one's unlock), then drop it here. */
	if (rcuref_synchronize(ctx, give_up_hook, NULL) != RCUREF_OK) {
		count(&errors, 1);
		return; /* leaked: never freed under a reader */
	}
	count(&grace_periods, 1);
	file_put(old);
#endif
}

/* An interrupt handler's replacement of its own entry (it cannot wait). */
static void isr_replace(uint32_t fd, uint32_t gen)
{
	if (rcuref_call_rcu_pending(rcu) + 4 > rcuref_call_rcu_capacity(rcu)) {
		count(&isr_full, 1);
		return;
	}
	struct file *nf = file_alloc(fd, gen);
	if (!nf)
		return;
	struct file *old = rcuref_exchange_pointer(&fdt[fd], nf);
	if (!old)
		return;
	count(&replaced, 1);
	if (rcuref_call_rcu(rcu, drop_table_ref, old) == RCUREF_OK) {
		count(&queued_from_isr, 1);
		return;
	}
	/* Filled meanwhile by another context: put the old one back. The new one was
	 * visible only to interrupt handlers that preempted this one, and their sections
	 * have ended (one core): nobody else can hold it. */
	count(&isr_full, 1);
	rcuref_exchange_pointer(&fdt[fd], old);
	file_put(nf);
}

static void writer_task(void *arg)
{
	(void)arg;
	const rcuref_ctx *ctx = open_own_context(SLOT_WRITER);
	writer_handle = xTaskGetCurrentTaskHandle();
	uint32_t gen = 0;
	while (ctx && !stop) {
		for (int b = 0; b < 12; b++) {
			gen++;
			uint32_t fd = gen % WRITER_FDS;
			struct file *nf = file_alloc(fd, gen);
			if (!nf)
				break;
			struct file *old = rcuref_exchange_pointer(&fdt[fd], nf);
			if (old) {
				count(&replaced, 1);
				retire(ctx, old, gen % 8 == 0);
			}
		}
		(void)rcuref_call_rcu_run(ctx);
		vTaskDelay(1);
	}
	parked[SLOT_WRITER] = 1;
	vTaskSuspend(NULL);
}

/* ---- the readers ---- */

static void reader_task(void *arg)
{
	uint32_t slot = (uint32_t)(uintptr_t)arg;
	const rcuref_ctx *ctx = open_own_context(slot);
	uint32_t seed = 0x9e3779b9u * (slot + 1);
	/* The lowest reads for several ticks between sleeps, so that the writer and the
	 * handlers preempt it inside its sections; the top one outranks the writer. */
	unsigned burst = slot == 0 ? 4000 : slot == READERS - 1 ? 16 : 48;
	while (ctx && !stop) {
		for (unsigned b = 0; b < burst; b++) {
			uint32_t fd = xorshift(&seed) % FDS;
			if (rcuref_read_lock(ctx) != RCUREF_OK) {
				count(&errors, 1);
				break;
			}
			struct file *f = lookup(fd, DWELL);
			if (rcuref_read_unlock(ctx) != RCUREF_OK)
				count(&errors, 1);
			count(&sections, 1);
			if (f)
				use_and_put(f, fd);
		}
		vTaskDelay(1);
	}
	parked[slot] = 1;
	vTaskSuspend(NULL);
}

/* An interrupt handler's reads, nested on the interrupted task's slot. */
static void isr_read(uint32_t *seed, unsigned lookups)
{
	if (rcuref_rcu_read_lock() != RCUREF_OK) {
		count(&isr_no_ctx, 1); /* no task has a context yet */
		return;
	}
	for (unsigned i = 0; i < lookups; i++) {
		uint32_t fd = xorshift(seed) % FDS;
		struct file *f = lookup(fd, DWELL / 4);
		if (f)
			use_and_put(f, fd); /* inside the section here: also fine */
	}
	if (rcuref_rcu_read_unlock() != RCUREF_OK)
		count(&errors, 1);
	count(&isr_sections, 1);
}

/* ---- interrupts ---- */

#define TIMER0_BASE 0x40000000u
#define TIMER1_BASE 0x40001000u
#define TIMER_IRQ0 8
#define REG(a) (*(volatile uint32_t *)(a))

static void timer_start(uint32_t base, uint32_t irq, uint8_t prio, uint32_t reload)
{
	REG(base + 0x8) = reload; /* RELOAD */
	REG(base + 0x4) = reload; /* VALUE */
	REG(base + 0xC) = 1;      /* INTCLEAR */
	*(volatile uint8_t *)(0xE000E400u + irq) = prio;
	REG(0xE000E100u) = 1u << irq; /* NVIC ISER0 */
	REG(base + 0x0) = 1u | 8u;    /* enable, interrupt enable */
}

static void timer_stop(uint32_t base, uint32_t irq)
{
	REG(base + 0x0) = 0;
	REG(0xE000E180u) = 1u << irq; /* NVIC ICER0 */
	REG(base + 0xC) = 1;
}

void timer0_handler(void)
{
	static uint32_t seed = 0x1234567u, n;
	REG(TIMER0_BASE + 0xC) = 1;
	isr_read(&seed, 2);
	if (++n % 4 == 0 && !stop)
		isr_replace(FD_TIMER0, n);
}

void timer1_handler(void)
{
	static uint32_t seed = 0x7654321u;
	REG(TIMER1_BASE + 0xC) = 1;
	in_timer1++;
	isr_read(&seed, 1);
	in_timer1--;
}

void vApplicationTickHook(void)
{
	static uint32_t seed = 0xabcdefu, n;
	if (stop)
		return;
	isr_read(&seed, 2);
	if (++n % 8 == 0)
		isr_replace(FD_TICK, n);
}

/* Runs the call_rcu queue whenever every other task sleeps. */
void vApplicationIdleHook(void)
{
	const rcuref_ctx *ctx = pvTaskGetThreadLocalStoragePointer(NULL, 0);
	if (!ctx)
		ctx = open_own_context(SLOT_IDLE);
	if (ctx)
		(void)rcuref_call_rcu_run(ctx);
}

/* ---- the kernel's other hooks ---- */

void app_assert_failed(const char *file, int line)
{
	(void)line;
	sh_puts("configASSERT failed: ");
	sh_puts(file);
	sh_puts("\n");
	sh_exit(0);
}

void vApplicationMallocFailedHook(void)
{
	sh_puts("FreeRTOS heap exhausted\n");
	sh_exit(0);
}

void vApplicationStackOverflowHook(TaskHandle_t task, char *name)
{
	(void)task;
	sh_puts("stack overflow: ");
	sh_puts(name);
	sh_puts("\n");
	sh_exit(0);
}

/* ---- main ---- */

static void put_u32(const char *label, uint32_t v)
{
	char buf[12], *p = buf + sizeof buf - 1;
	*p = 0;
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	sh_puts(label);
	sh_puts(p);
}

static uint32_t get(atomic_uint *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static void main_task(void *arg)
{
	(void)arg;
	const rcuref_ctx *ctx = open_own_context(SLOT_MAIN);
	for (uint32_t fd = 0; fd < FDS; fd++)
		rcuref_assign_pointer(&fdt[fd], file_alloc(fd, 0));
	rcuref_set_current_context(current_context);

	/* The readers at 1, 2, 3 and 5, the writer at 4: this task (7) runs until it
	 * sleeps, so each opens its own context when it first runs. */
	static const UBaseType_t prio[READERS] = {1, 2, 3, 5};
	for (uint32_t i = 0; i < READERS; i++)
		if (xTaskCreate(reader_task, "reader", 384, (void *)(uintptr_t)i, prio[i], NULL) !=
		    pdPASS)
			count(&errors, 1);
	if (xTaskCreate(writer_task, "writer", 384, NULL, 4, NULL) != pdPASS)
		count(&errors, 1);
	/* TIMER0 at about 2.3 kHz, TIMER1 at about 1.6 kHz (25 MHz). */
	timer_start(TIMER0_BASE, TIMER_IRQ0, APP_TIMER0_PRIORITY, 10831);
	timer_start(TIMER1_BASE, TIMER_IRQ0 + 1, APP_TIMER1_PRIORITY, 15601);

	vTaskDelay(RUN_TICKS);

	stop = 1;
	timer_stop(TIMER0_BASE, TIMER_IRQ0);
	timer_stop(TIMER1_BASE, TIMER_IRQ0 + 1);
	for (int waited = 0; waited < 1000; waited++) {
		int all = 1;
		for (int s = 0; s <= SLOT_WRITER; s++)
			all = all && parked[s];
		if (all)
			break;
		vTaskDelay(1);
	}
	for (int s = 0; s <= SLOT_WRITER; s++)
		if (!parked[s]) {
			sh_puts("a task did not stop\n");
			count(&errors, 1);
		}
	/* Unpublish everything, then wait for every callback. */
	for (uint32_t fd = 0; fd < FDS; fd++) {
		struct file *old = rcuref_exchange_pointer(&fdt[fd], NULL);
		if (old)
			retire(ctx, old, 0);
	}
	if (!ctx || rcuref_rcu_barrier(ctx, sleep_hook, NULL) != RCUREF_OK)
		count(&errors, 1);
	uint32_t leaked = 0;
	for (unsigned i = 0; i < FILES; i++)
		leaked += atomic_load(&files[i].used);

	put_u32("freertos rcuref: sections ", get(&sections));
	put_u32(" (interrupt ", get(&isr_sections));
	put_u32(", before any context ", get(&isr_no_ctx));
	put_u32("), references ", get(&refs));
	put_u32(" (last put by a reader ", get(&last_puts_by_readers));
	put_u32("), replaced ", get(&replaced));
	put_u32(", grace periods waited ", get(&grace_periods));
	put_u32(", call_rcu ", get(&queued));
	put_u32(" + from interrupts ", get(&queued_from_isr));
	put_u32(" (full ", get(&isr_full));
	put_u32("), callbacks ", get(&callbacks));
	put_u32(", frees ", get(&frees));
	put_u32(", leaked ", leaked);
	put_u32(", errors ", get(&errors));
	put_u32(", violations ", get(&violations));
	put_u32("; the writer slept ", get(&sleeps));
	put_u32(" times, woken by an unlock ", get(&woken_sleeps));
	sh_puts("\n");
#ifdef BROKEN
	sh_exit(get(&violations) > 0);
#elif defined(NO_WAKE)
	/* The control: no wake is sent, so no sleep ends by one (the check below can tell a
	 * wake from a tick). */
	sh_exit(get(&violations) == 0 && get(&errors) == 0 && get(&sleeps) >= 100 &&
		get(&woken_sleeps) == 0);
#else
	sh_exit(get(&violations) == 0 && get(&errors) == 0 && leaked == 0 &&
		get(&sections) >= 10000 && get(&isr_sections) >= 2000 &&
		get(&grace_periods) >= 100 && get(&callbacks) >= 1000 &&
		get(&queued_from_isr) >= 100 && get(&last_puts_by_readers) > 0 &&
		get(&sleeps) >= 100 && get(&woken_sleeps) * 2 >= get(&sleeps));
#endif
}

int main(void)
{
	rcu = rcuref_rcu_domain(0);
	if (!rcu || rcuref_rcu_slots(rcu) < SLOTS_USED)
		return 1;
	if (rcuref_set_sleep(rcu, 4, rcu_sleep, NULL, rcu_wake) != RCUREF_OK)
		return 1;
	if (xTaskCreate(main_task, "main", 512, NULL, configMAX_PRIORITIES - 1, NULL) != pdPASS)
		return 1;
	vTaskStartScheduler();
	return 1;
}
