/*
 * Start-up for the C firmware (Cortex-M4, mps2-an386 in QEMU): the vector table, the
 * reset handler, SysTick as the timer interrupt, interrupt masking, semihosting output
 * and exit, and the critical section that librcuref_ffi.a asks the program for on a
 * target without 64-bit atomics (docs/c-api.md): PRIMASK saved and set, then restored.
 */
#include <stdint.h>

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);
extern void tick(void);
void systick_handler(void);
void reset_handler(void);

static void fault_handler(void)
{
	for (;;)
		;
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
	(void (*)(void))&_estack, /* initial stack pointer */
	reset_handler,
	fault_handler, /* NMI */
	fault_handler, /* HardFault */
	fault_handler, /* MemManage */
	fault_handler, /* BusFault */
	fault_handler, /* UsageFault */
	0, 0, 0, 0,
	fault_handler, /* SVCall */
	fault_handler, /* DebugMonitor */
	0,
	fault_handler, /* PendSV */
	systick_handler,
};

static int semihost(int op, const void *arg)
{
	register int r0 __asm__("r0") = op;
	register const void *r1 __asm__("r1") = arg;
	__asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
	return r0;
}

void sh_puts(const char *s)
{
	semihost(0x04, s); /* SYS_WRITE0 */
}

void sh_exit(int ok)
{
	/* SYS_EXIT: ApplicationExit (QEMU exits 0) or RunTimeErrorUnknown (exits 1). */
	semihost(0x18, (const void *)(uintptr_t)(ok ? 0x20026 : 0x20023));
	for (;;)
		;
}

void reset_handler(void)
{
	uint32_t *src = &_sidata, *dst = &_sdata;
	while (dst < &_edata)
		*dst++ = *src++;
	for (dst = &_sbss; dst < &_ebss; dst++)
		*dst = 0;
	/* The FPU (the archive is built for the hard-float ABI). */
	*(volatile uint32_t *)0xE000ED88 |= 0xFu << 20;
	__asm__ volatile("dsb\n isb" ::: "memory");
	sh_exit(main() == 0);
}

uint8_t _critical_section_1_0_acquire(void)
{
	uint32_t primask;
	__asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(primask)::"memory");
	return (uint8_t)(primask & 1);
}

void _critical_section_1_0_release(uint8_t was_masked)
{
	if (!was_masked)
		__asm__ volatile("cpsie i" ::: "memory");
}

void systick_handler(void)
{
	tick();
}

/* SysTick every 2000 cycles of the core clock. */
void timer_start(void)
{
	*(volatile uint32_t *)0xE000E014 = 2000 - 1; /* reload */
	*(volatile uint32_t *)0xE000E018 = 0;        /* current */
	*(volatile uint32_t *)0xE000E010 = 7;        /* enable, interrupt, core clock */
}

void timer_stop(void)
{
	*(volatile uint32_t *)0xE000E010 = 0;
}

uint32_t irq_mask(void)
{
	uint32_t m;
	__asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(m)::"memory");
	return m;
}

void irq_unmask(uint32_t was)
{
	if (!(was & 1))
		__asm__ volatile("cpsie i" ::: "memory");
}
