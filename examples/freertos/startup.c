/*
 * Start-up of the FreeRTOS example (main.c) on QEMU's mps2-an385 (Cortex-M3) and
 * mps2-an386 (Cortex-M4F): the vector table (the kernel's SVC, PendSV and SysTick
 * handlers, the CMSDK TIMER0 and TIMER1 interrupts), the reset handler, semihosting
 * output and exit, and the fault handlers, which report and exit.
 */
#include <stdint.h>

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);
void reset_handler(void);
void sh_puts(const char *s);
void sh_exit(int ok);

/* The kernel's handlers (portable/GCC/ARM_CM3 and ARM_CM4F port.c). */
void vPortSVCHandler(void);
void xPortPendSVHandler(void);
void xPortSysTickHandler(void);
/* main.c's. */
void timer0_handler(void);
void timer1_handler(void);

static void fault_handler(void)
{
	sh_puts("fault\n");
	sh_exit(0);
}

static void unexpected_handler(void)
{
	sh_puts("unexpected interrupt\n");
	sh_exit(0);
}

#define IRQS 32
__attribute__((section(".vectors"), used)) static void (*const vectors[16 + IRQS])(void) = {
	[0] = (void (*)(void))&_estack, /* initial stack pointer */
	[1] = reset_handler,
	[2] = fault_handler,  /* NMI */
	[3] = fault_handler,  /* HardFault */
	[4] = fault_handler,  /* MemManage */
	[5] = fault_handler,  /* BusFault */
	[6] = fault_handler,  /* UsageFault */
	[11] = vPortSVCHandler,
	[12] = unexpected_handler, /* DebugMonitor */
	[14] = xPortPendSVHandler,
	[15] = xPortSysTickHandler,
	[16 ... 16 + 7] = unexpected_handler,
	[16 + 8] = timer0_handler, /* CMSDK TIMER0 */
	[16 + 9] = timer1_handler, /* CMSDK TIMER1 */
	[16 + 10 ... 16 + IRQS - 1] = unexpected_handler,
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
#if defined(__ARM_FP)
	/* The FPU (the Cortex-M4F build uses the hard-float ABI). */
	*(volatile uint32_t *)0xE000ED88 |= 0xFu << 20;
	__asm__ volatile("dsb\n isb" ::: "memory");
#endif
	sh_exit(main() == 0);
}
