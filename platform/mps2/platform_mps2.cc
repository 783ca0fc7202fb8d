// The platform layer on Arm's MPS2 boards (QEMU mps2-an386 / mps2-an500):
// logs and exit through semihosting, ticks from SysTick.
//
// Ticks: SysTick counts down from 2^24 - 1 at the core clock and interrupts
// on every wrap; the handler counts wraps, so a tick is one core clock cycle
// and the count is 64 bits wide. On silicon that is a cycle count. Under
// QEMU, SysTick follows QEMU's virtual clock: host time scaled to 25 MHz by
// default, or guest instructions with `-icount shift=N` (each instruction
// advances the clock 2^N ns, that is 2^N / 40 ticks) -- never real cycles.
// The DWT cycle counter is not used because QEMU does not model it.

#include <stdarg.h>

#include "kiln/platform/mps2.h"
#include "kiln/platform/platform.h"

namespace {

// Semihosting operations (Arm "Semihosting for AArch32 and AArch64").
constexpr uint32_t kSysWrite0 = 0x04;
constexpr uint32_t kSysExit = 0x18;
constexpr uint32_t kSysExitExtended = 0x20;
constexpr uint32_t kAdpStoppedApplicationExit = 0x20026;
constexpr uint32_t kAdpStoppedRunTimeErrorUnknown = 0x20023;

// Status an abort ends with: what a POSIX shell reports for SIGABRT.
constexpr int kAbortStatus = 134;

uint32_t semihost(uint32_t operation, const void* argument) {
  register uint32_t r0 __asm__("r0") = operation;
  register const void* r1 __asm__("r1") = argument;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

// SysTick registers (Armv7-M architecture reference manual, B3.3).
struct SysTick {
  volatile uint32_t ctrl;
  volatile uint32_t load;
  volatile uint32_t value;
  volatile uint32_t calib;
};
SysTick* const kSysTick = reinterpret_cast<SysTick*>(0xE000E010u);
constexpr uint32_t kSysTickEnable = 1u << 0;
constexpr uint32_t kSysTickInterrupt = 1u << 1;
constexpr uint32_t kSysTickCoreClock = 1u << 2;
constexpr uint32_t kSysTickPeriod = 1u << 24;

volatile uint32_t g_systick_wraps = 0;
bool g_initialized = false;

}  // namespace

extern "C" {

void kiln_mps2_systick_handler(void) { g_systick_wraps = g_systick_wraps + 1; }

void kiln_pal_init(void) {
  if (g_initialized) return;
  g_initialized = true;
  kSysTick->ctrl = 0;
  kSysTick->load = kSysTickPeriod - 1;
  kSysTick->value = 0;
  kSysTick->ctrl = kSysTickCoreClock | kSysTickInterrupt | kSysTickEnable;
}

uint64_t kiln_pal_ticks(void) {
  // Read the wrap count on both sides of the counter: if a wrap came in
  // between, its interrupt has run (SysTick is never masked here) and the
  // second read differs, so read again.
  uint32_t wraps;
  uint32_t value;
  do {
    wraps = g_systick_wraps;
    value = kSysTick->value;
  } while (wraps != g_systick_wraps);
  return static_cast<uint64_t>(wraps) * kSysTickPeriod + (kSysTickPeriod - 1 - value);
}

uint64_t kiln_pal_ticks_per_second(void) { return KILN_MPS2_CORE_CLOCK_HZ; }

void kiln_mps2_write(const char* text, size_t length) {
  // SYS_WRITE0 takes a NUL-terminated string, so the text goes out in
  // terminated chunks (it may itself contain no NUL).
  char chunk[128];
  while (length > 0) {
    size_t n = length < sizeof(chunk) - 1 ? length : sizeof(chunk) - 1;
    for (size_t i = 0; i < n; ++i) chunk[i] = text[i];
    chunk[n] = '\0';
    semihost(kSysWrite0, chunk);
    text += n;
    length -= n;
  }
}

int kiln_mps2_printf(const char* format, ...) {
  char text[256];
  va_list args;
  va_start(args, format);
  int n = kiln_mps2_vformat(text, sizeof(text), format, args);
  va_end(args);
  if (n < 0) return n;
  size_t length = static_cast<size_t>(n) < sizeof(text) ? static_cast<size_t>(n) : sizeof(text) - 1;
  kiln_mps2_write(text, length);
  return static_cast<int>(length);
}

void kiln_pal_log(kiln_log_level level, const char* file, int line, const char* message, size_t length) {
  static const char* const kPrefix[] = {"D", "I", "W", "E"};
  const char* base = file;
  if (file != nullptr) {
    for (const char* p = file; *p != '\0'; ++p) {
      if (*p == '/') base = p + 1;
    }
    kiln_mps2_printf("[kiln %s %s:%d] ", kPrefix[static_cast<int>(level) & 3], base, line);
  } else {
    kiln_mps2_printf("[kiln %s] ", kPrefix[static_cast<int>(level) & 3]);
  }
  kiln_mps2_write(message, length);
  kiln_mps2_write("\n", 1);
}

void kiln_mps2_exit(int status) {
  const uint32_t block[2] = {kAdpStoppedApplicationExit, static_cast<uint32_t>(status)};
  semihost(kSysExitExtended, block);
  // Only reached where SYS_EXIT_EXTENDED is not supported: SYS_EXIT on
  // AArch32 carries a reason, not a status, so only success or failure.
  semihost(kSysExit,
           reinterpret_cast<const void*>(status == 0 ? kAdpStoppedApplicationExit : kAdpStoppedRunTimeErrorUnknown));
  for (;;) {
  }
}

void kiln_pal_abort(void) {
  static const char kMessage[] = "[kiln E] abort\n";
  kiln_mps2_write(kMessage, sizeof(kMessage) - 1);
  kiln_mps2_exit(kAbortStatus);
}

// Called if a pure virtual function is ever called through a half-built or
// half-destroyed object. Defined here because images do not link the C++
// runtime library (libsupc++) that normally provides it.
void __cxa_pure_virtual(void) { kiln_pal_abort(); }

}  // extern "C"
