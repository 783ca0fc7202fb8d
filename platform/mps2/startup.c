/* Start-up code and vector table for Arm's MPS2 boards (Cortex-M4 AN386,
 * Cortex-M7 AN500; also what QEMU's mps2-an386 / mps2-an500 models boot).
 *
 * On reset the core loads the stack pointer and the reset handler's address
 * from the first two words of the vector table at address 0. The handler:
 *   1. turns on the floating-point unit (the code is built hard-float),
 *   2. copies initialised data from flash to RAM and zeroes .bss,
 *   3. paints the unused stack with a pattern, so kiln_mps2_stack_used()
 *      can later tell how deep the stack has been,
 *   4. runs static constructors (.init_array),
 *   5. starts the platform layer (SysTick) and calls main(),
 *   6. ends the program with main's return value as the exit status.
 * Every fault ends the program with a failure status instead of hanging.
 *
 * The symbols come from the linker script mps2.ld. */

#include <stdint.h>

#include "kiln/platform/mps2.h"
#include "kiln/platform/platform.h"

extern uint32_t __data_load[];
extern uint32_t __data_start[];
extern uint32_t __data_end[];
extern uint32_t __bss_start[];
extern uint32_t __bss_end[];
extern uint32_t __stack_limit[];
extern uint32_t __stack_top[];
extern void (*__init_array_start[])(void);
extern void (*__init_array_end[])(void);

extern int main(void);
void kiln_mps2_systick_handler(void);

#define STACK_PAINT 0x5AC3A55Cu

/* Exit statuses of faults: 128 + the exception number, like a signal. */
static void fault(uint32_t exception) { kiln_mps2_exit(128 + (int)exception); }

static void hard_fault_handler(void) { fault(3); }
static void mem_manage_handler(void) { fault(4); }
static void bus_fault_handler(void) { fault(5); }
static void usage_fault_handler(void) { fault(6); }
static void unexpected_handler(void) { fault(0); }

void kiln_mps2_reset_handler(void) {
  /* CPACR: full access to coprocessors 10 and 11 (the FPU), before any
   * floating-point instruction runs. */
  volatile uint32_t* const cpacr = (volatile uint32_t*)0xE000ED88u;
  *cpacr |= 0xFu << 20;
  __asm__ volatile("dsb\n\tisb" ::: "memory");

  for (uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) *dst++ = *src++;
  for (uint32_t* dst = __bss_start; dst < __bss_end;) *dst++ = 0;
  /* Everything below this function's frame, less a margin for the calls
   * that follow before main() (the loop itself uses no stack). */
  uint32_t* sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (uint32_t* p = __stack_limit; p < sp - 64;) *p++ = STACK_PAINT;
  for (void (**ctor)(void) = __init_array_start; ctor < __init_array_end; ++ctor) (*ctor)();

  kiln_pal_init();
  kiln_mps2_exit(main());
}

size_t kiln_mps2_stack_used(void) {
  const uint32_t* p = __stack_limit;
  while (p < __stack_top && *p == STACK_PAINT) ++p;
  return (size_t)((const uint8_t*)__stack_top - (const uint8_t*)p);
}

size_t kiln_mps2_stack_size(void) { return (size_t)((const uint8_t*)__stack_top - (const uint8_t*)__stack_limit); }

typedef void (*Handler)(void);

/* The first 16 entries are the Cortex-M system exceptions; the board's 32
 * interrupt lines are unused and fault if they ever fire. */
__attribute__((section(".vectors"), used)) const Handler kiln_mps2_vector_table[16 + 32] = {
    (Handler)__stack_top,
    kiln_mps2_reset_handler,
    unexpected_handler, /* NMI */
    hard_fault_handler,
    mem_manage_handler,
    bus_fault_handler,
    usage_fault_handler,
    0,
    0,
    0,
    0,                  /* reserved */
    unexpected_handler, /* SVCall */
    unexpected_handler, /* debug monitor */
    0,                  /* reserved */
    unexpected_handler, /* PendSV */
    kiln_mps2_systick_handler,
    [16 ... 16 + 31] = unexpected_handler,
};
