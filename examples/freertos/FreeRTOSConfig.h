/*
 * FreeRTOS configuration of the rcuref example (main.c): QEMU's mps2-an385 (Cortex-M3,
 * port GCC/ARM_CM3) and mps2-an386 (Cortex-M4F, port GCC/ARM_CM4F), both clocked at
 * 25 MHz, a 1 kHz tick, heap_4.
 */
#ifndef FREERTOS_CONFIG_H
#define FREERTOS_CONFIG_H

#define configCPU_CLOCK_HZ 25000000UL
#define configTICK_RATE_HZ 1000
#define configUSE_PREEMPTION 1
#define configUSE_TIME_SLICING 1
#define configUSE_PORT_OPTIMISED_TASK_SELECTION 0
#define configMAX_PRIORITIES 8
#define configMINIMAL_STACK_SIZE 256
#define configTOTAL_HEAP_SIZE (48 * 1024)
#define configMAX_TASK_NAME_LEN 12
#define configTICK_TYPE_WIDTH_IN_BITS TICK_TYPE_WIDTH_32_BITS
#define configIDLE_SHOULD_YIELD 1
#define configUSE_MUTEXES 0
#define configUSE_RECURSIVE_MUTEXES 0
#define configUSE_COUNTING_SEMAPHORES 0
#define configQUEUE_REGISTRY_SIZE 0
#define configUSE_TIMERS 0
#define configUSE_TASK_NOTIFICATIONS 1
#define configSUPPORT_DYNAMIC_ALLOCATION 1
#define configSUPPORT_STATIC_ALLOCATION 0
#define configUSE_IDLE_HOOK 1     /* runs the call_rcu queue */
#define configUSE_TICK_HOOK 1     /* reads the fd table from SysTick */
#define configUSE_MALLOC_FAILED_HOOK 1
#define configCHECK_FOR_STACK_OVERFLOW 2
#define configUSE_TRACE_FACILITY 0
#define configGENERATE_RUN_TIME_STATS 0
/* Each task's rcuref_ctx lives in its thread-local storage pointer 0. */
#define configNUM_THREAD_LOCAL_STORAGE_POINTERS 1

/* Interrupt priorities (the top bits of the 8-bit field; QEMU implements 8 bits, the
 * mps2 boards' real cores 3). SysTick and PendSV run at the lowest; the kernel masks up
 * to configMAX_SYSCALL_INTERRUPT_PRIORITY (BASEPRI); TIMER0 sits at it (it may call the
 * kernel's FromISR functions), TIMER1 above it (never masked by the kernel: it calls
 * rcuref only, which takes no critical section on Cortex-M3/M4 for what it uses). */
#define configKERNEL_INTERRUPT_PRIORITY 0xFF
#define configMAX_SYSCALL_INTERRUPT_PRIORITY 0x40
#define APP_TIMER0_PRIORITY 0x60
#define APP_TIMER1_PRIORITY 0x20

#define INCLUDE_vTaskDelay 1
#define INCLUDE_vTaskSuspend 1
#define INCLUDE_vTaskDelete 0
#define INCLUDE_vTaskPrioritySet 0
#define INCLUDE_uxTaskPriorityGet 0
#define INCLUDE_xTaskGetIdleTaskHandle 1
#define INCLUDE_xTaskGetCurrentTaskHandle 1
#define INCLUDE_xTaskGetSchedulerState 1

#ifndef __ASSEMBLER__
void app_assert_failed(const char *file, int line);
void app_task_switched_in(void);
#endif
#define configASSERT(x)                                                                  \
	do {                                                                             \
		if (!(x))                                                                \
			app_assert_failed(__FILE__, __LINE__);                           \
	} while (0)

/* The current-context pointer for rcuref_rcu_read_lock(): updated whenever a task is
 * switched in, so an interrupt handler finds the context of the task it interrupted. */
#define traceTASK_SWITCHED_IN() app_task_switched_in()

#endif /* FREERTOS_CONFIG_H */
