// Services of the mps2 platform beyond platform.h, for firmware that runs on
// Arm's MPS2 boards: the QEMU models mps2-an386 (Cortex-M4) and mps2-an500
// (Cortex-M7), or a real board with a debugger attached.
//
// Output and exit go through Arm semihosting (a `bkpt 0xAB` the debugger or
// QEMU answers), so without a debugger or `-semihosting` they stop the core
// in a fault. None of these functions allocates; the console functions are
// not reentrant (call them from thread mode only).

#ifndef KILN_PLATFORM_MPS2_H_
#define KILN_PLATFORM_MPS2_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The core clock of the MPS2 FPGA images: SysTick counts at this rate.
#define KILN_MPS2_CORE_CLOCK_HZ 25000000u

// Writes `length` bytes to the semihosting console.
void kiln_mps2_write(const char* text, size_t length);

// printf to the semihosting console through the platform's formatter (see
// kiln_mps2_vformat). Returns the number of characters written.
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int kiln_mps2_printf(const char* format, ...);

// Formats like vsnprintf into `out` (always NUL-terminated when size > 0) and
// returns the length the whole text would have. No heap, no locale. Supports
// the flags '-' and '0', a width, a precision, the length modifiers hh, h, l,
// ll, z, j and t, and the conversions d i u x X o c s p % and f (printed with
// single-precision arithmetic: about 7 significant digits; magnitudes of 2^32
// and more in scientific notation).
int kiln_mps2_vformat(char* out, size_t size, const char* format, va_list args);

// The deepest the stack has been since reset, in bytes (the start-up code
// paints it; a word that no longer holds the paint was used), and the size
// reserved for it (KILN_STACK_SIZE in the linker script).
size_t kiln_mps2_stack_used(void);
size_t kiln_mps2_stack_size(void);

// Ends the program with `status` as the exit code of QEMU (semihosting
// SYS_EXIT_EXTENDED; with a debugger that lacks it, SYS_EXIT reports success
// or failure only). Never returns.
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void kiln_mps2_exit(int status);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // KILN_PLATFORM_MPS2_H_
