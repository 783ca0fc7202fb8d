# Cross build for Cortex-M microcontrollers with Arm's GNU toolchain
# (Debian: gcc-arm-none-eabi, libnewlib-arm-none-eabi, and the C++ headers
# from libstdc++-arm-none-eabi-dev).
#
# KILN_ARM_CPU picks the core and its floating-point unit (hard-float ABI):
#   cortex-m4   Armv7E-M, single-precision FPv4 (the QEMU mps2-an386 board)
#   cortex-m7   Armv7E-M, double-precision FPv5
# Code is built for size (-Os through MinSizeRel), C++ without exceptions,
# RTTI or thread-safe statics, every function and object in its own section
# so the link drops what no one calls, and linked against newlib-nano. The
# startup code, vector table and linker script come from the platform layer
# (platform/mps2/), not from the toolchain's crt0.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
find_program(CMAKE_OBJCOPY arm-none-eabi-objcopy)
find_program(CMAKE_SIZE arm-none-eabi-size)
find_program(CMAKE_NM arm-none-eabi-nm)

# Compiler checks cannot link a bare-metal program without a linker script.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(KILN_ARM_CPU "cortex-m4" CACHE STRING "Cortex-M core to build for: cortex-m4 or cortex-m7")
set_property(CACHE KILN_ARM_CPU PROPERTY STRINGS cortex-m4 cortex-m7)
if(KILN_ARM_CPU STREQUAL "cortex-m4")
  set(kiln_arm_flags "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard")
elseif(KILN_ARM_CPU STREQUAL "cortex-m7")
  set(kiln_arm_flags "-mcpu=cortex-m7 -mthumb -mfpu=fpv5-d16 -mfloat-abi=hard")
else()
  message(FATAL_ERROR "KILN_ARM_CPU must be cortex-m4 or cortex-m7, not '${KILN_ARM_CPU}'")
endif()

set(kiln_common_flags "${kiln_arm_flags} -ffunction-sections -fdata-sections")
set(CMAKE_C_FLAGS_INIT "${kiln_common_flags}")
set(CMAKE_CXX_FLAGS_INIT
    "${kiln_common_flags} -fno-exceptions -fno-rtti -fno-threadsafe-statics")
set(CMAKE_ASM_FLAGS_INIT "${kiln_arm_flags}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${kiln_arm_flags} --specs=nano.specs -nostartfiles -Wl,--gc-sections")
# C++ images link through the C driver, with libc and libm but without
# libstdc++ and libsupc++: code with no heap, exceptions or RTTI needs
# nothing from them (the platform layer defines __cxa_pure_virtual), and
# their multilib archives are a 300 MB package that a build can do without.
set(CMAKE_CXX_LINK_EXECUTABLE
    "<CMAKE_C_COMPILER> <FLAGS> <CMAKE_CXX_LINK_FLAGS> <LINK_FLAGS> <OBJECTS> -o <TARGET> <LINK_LIBRARIES> -lm")

# Programs (flatc, python) run on the build machine; libraries and headers
# come from the toolchain only.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
