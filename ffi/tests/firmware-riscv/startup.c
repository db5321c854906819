/*
 * Start-up for the RISC-V C firmware (riscv64gc, QEMU virt, two harts, machine mode):
 * each hart gets a 16 KiB stack; hart 0 zeroes .bss and runs main(), hart 1 waits for
 * it and runs hart1_main(). Semihosting for output; QEMU's test finisher (0x100000)
 * for the exit status.
 */
#include <stdint.h>

extern int main(void);
extern void hart1_main(void);
extern uint8_t _sbss[], _ebss[];
__attribute__((section(".data"))) static volatile int bss_ready;

__attribute__((naked, section(".text.start"))) void _start(void)
{
	__asm__ volatile(
		".option push\n .option norelax\n"
		"la gp, __global_pointer$\n"
		".option pop\n"
		"li t2, 0x2000\n csrs mstatus, t2\n" /* FS: the FPU on (interrupt entry saves FP registers) */
		"csrr t0, mhartid\n"
		"addi t1, t0, 1\n"
		"slli t1, t1, 14\n" /* (hartid + 1) * 16 KiB */
		"la sp, _stacks\n"
		"add sp, sp, t1\n"
		"mv a0, t0\n"
		"j hart_entry\n");
}

__attribute__((noreturn)) void finish(int ok);
__attribute__((noreturn)) void finish(int ok)
{
	/* sifive_test: 0x5555 passes; (code << 16) | 0x3333 fails with `code`. */
	*(volatile uint32_t *)0x100000 = ok ? 0x5555 : (1u << 16) | 0x3333;
	for (;;)
		;
}

__attribute__((noreturn, used)) void hart_entry(uintptr_t hartid)
{
	if (hartid == 0) {
		for (uint8_t *p = _sbss; p < _ebss; p++)
			*p = 0;
		__atomic_store_n(&bss_ready, 1, __ATOMIC_RELEASE);
		finish(main() == 0);
	}
	while (!__atomic_load_n(&bss_ready, __ATOMIC_ACQUIRE))
		;
	if (hartid == 1)
		hart1_main();
	for (;;)
		__asm__ volatile("wfi");
}

__attribute__((aligned(16))) static long semihost(long op, const void *arg)
{
	register long a0 __asm__("a0") = op;
	register const void *a1 __asm__("a1") = arg;
	__asm__ volatile(".option push\n .option norvc\n"
			 "slli x0, x0, 0x1f\n ebreak\n srai x0, x0, 7\n"
			 ".option pop\n"
			 : "+r"(a0)
			 : "r"(a1)
			 : "memory");
	return a0;
}

void sh_puts(const char *s)
{
	semihost(0x04, s); /* SYS_WRITE0 */
}

/* The timer interrupt: the CLINT's machine timer of hart 0, every INTERVAL ticks of
 * mtime (10 MHz on virt). */
#define MTIMECMP0 ((volatile uint64_t *)0x2004000)
#define MTIME ((volatile uint64_t *)0x200bff8)
#define INTERVAL 2000

extern void tick(void);
static volatile int timer_on;

__attribute__((interrupt("machine"), aligned(4))) static void trap_handler(void)
{
	uintptr_t cause;
	__asm__ volatile("csrr %0, mcause" : "=r"(cause));
	if (cause == ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1) | 7)) {
		*MTIMECMP0 = timer_on ? *MTIME + INTERVAL : UINT64_MAX;
		tick();
		return;
	}
	finish(0); /* an exception: fail */
}

void timer_start(void)
{
	timer_on = 1;
	__asm__ volatile("csrw mtvec, %0" ::"r"(trap_handler));
	*MTIMECMP0 = *MTIME + INTERVAL;
	__asm__ volatile("csrs mie, %0" ::"r"(1 << 7));   /* MTIE */
	__asm__ volatile("csrs mstatus, %0" ::"r"(1 << 3)); /* MIE */
}

void timer_stop(void)
{
	__asm__ volatile("csrc mstatus, %0" ::"r"(1 << 3));
	timer_on = 0;
	*MTIMECMP0 = UINT64_MAX;
}

uint32_t irq_mask(void)
{
	uintptr_t was;
	__asm__ volatile("csrrc %0, mstatus, %1" : "=r"(was) : "r"(1 << 3) : "memory");
	return (uint32_t)(was >> 3) & 1;
}

void irq_unmask(uint32_t was)
{
	if (was)
		__asm__ volatile("csrs mstatus, %0" ::"r"(1 << 3) : "memory");
}
