# Cross build for arm64 (AArch64) Linux with Debian's GNU toolchain
# (g++-aarch64-linux-gnu), run on the build machine through qemu-user.
#
# What the project needs from a toolchain file is only the standard CMake
# variables below: the compilers, the system name and processor, and where
# the target's libraries live. Nothing in kiln's CMake reads a variable
# defined here, so another arm64 toolchain file replaces this one as is.
# The Android NDK's, for example (docs/cpu.md, "arm64"):
#   ANDROID_NDK=/path/to/ndk cmake --preset android-arm64
#
# Programs built here run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR,
# which ctest puts in front of every test whose command is a target):
#   -cpu max                    every extension QEMU models (dot product,
#                               fp16, SVE...), as QEMU_CPU=max would
#   -L /usr/aarch64-linux-gnu   the target's dynamic loader and libraries
# AArch64's Advanced SIMD (NEON) is part of the base architecture: no flag
# is needed for it, and the NEON kernels need no run-time detection.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(kiln_triple aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${kiln_triple}-gcc)
set(CMAKE_CXX_COMPILER ${kiln_triple}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${kiln_triple})

find_program(KILN_QEMU_AARCH64 qemu-aarch64)
if(KILN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${KILN_QEMU_AARCH64} -cpu max -L /usr/${kiln_triple})
endif()

# Programs (flatc, python) run on the build machine; libraries and headers
# come from the target's root only.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
