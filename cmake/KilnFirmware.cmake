# Firmware images for bare-metal platforms (KILN_PLATFORM other than posix).
# Included before any target is defined: its compile options apply to all.
#
# kiln_no_heap: link options that make any use of the heap a link error.
# Every allocation entry point -- C's malloc family and newlib's reentrant
# _r variants beneath it, sbrk, C++'s operator new/delete in all their
# overloads, and the C++ runtime's __cxa_* functions that allocate (exception
# objects, array new) or throw -- is renamed by `--wrap=SYMBOL` to
# `__wrap_SYMBOL`, which nothing defines. An image in which any kept code
# calls one of them therefore fails to link with
#     undefined reference to `__wrap_malloc'
# naming the caller, while code the linker discards (--gc-sections) may
# mention them freely. tests/firmware holds a test that this really fails.
#
# kiln_add_firmware(NAME SOURCES...): an executable NAME.elf linked with the
# runtime, the platform's board support (start-up code, linker script) and
# kiln_no_heap, with a link map beside it. add_test(COMMAND NAME) runs it
# through KILN_FIRMWARE_RUNNER, the emulator the platform names.

# Link-time optimisation: each image's code is optimised as one unit
# (inlining and constant propagation across files, 3.7 KB less .text in the
# DS-CNN images of examples/firmware_int8). Objects stay fat (machine code
# beside the bytecode), so nm, size and the size report read the libraries
# as before.
option(KILN_FIRMWARE_LTO "Link-time optimisation of firmware images" ON)
if(KILN_FIRMWARE_LTO)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-flto=auto> $<$<COMPILE_LANGUAGE:C,CXX>:-ffat-lto-objects>)
  add_link_options(-flto=auto)
endif()

set(KILN_HEAP_SYMBOLS
  malloc free calloc realloc reallocarray memalign aligned_alloc posix_memalign valloc pvalloc
  _malloc_r _free_r _calloc_r _realloc_r _memalign_r _valloc_r _pvalloc_r
  sbrk _sbrk _sbrk_r
  # operator new / new[] (size_t is unsigned int: "j"), plain, nothrow, aligned
  _Znwj _Znaj _ZnwjRKSt9nothrow_t _ZnajRKSt9nothrow_t
  _ZnwjSt11align_val_t _ZnajSt11align_val_t
  _ZnwjSt11align_val_tRKSt9nothrow_t _ZnajSt11align_val_tRKSt9nothrow_t
  # operator delete / delete[]: plain, sized, nothrow, aligned
  _ZdlPv _ZdaPv _ZdlPvj _ZdaPvj _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t
  _ZdlPvSt11align_val_t _ZdaPvSt11align_val_t _ZdlPvjSt11align_val_t _ZdaPvjSt11align_val_t
  _ZdlPvSt11align_val_tRKSt9nothrow_t _ZdaPvSt11align_val_tRKSt9nothrow_t
  # the C++ runtime's allocating and throwing entry points
  __cxa_allocate_exception __cxa_free_exception
  __cxa_allocate_dependent_exception __cxa_free_dependent_exception
  __cxa_vec_new __cxa_vec_new2 __cxa_vec_new3 __cxa_vec_delete __cxa_vec_delete2 __cxa_vec_delete3
  __cxa_throw __cxa_rethrow)

add_library(kiln_no_heap INTERFACE)
foreach(symbol IN LISTS KILN_HEAP_SYMBOLS)
  target_link_options(kiln_no_heap INTERFACE "LINKER:--wrap=${symbol}")
endforeach()

function(kiln_add_firmware name)
  add_executable(${name} ${ARGN})
  set_target_properties(${name} PROPERTIES SUFFIX .elf)
  target_link_libraries(${name} PRIVATE kiln_runtime kiln_board kiln_no_heap)
  target_link_options(${name} PRIVATE "LINKER:-Map=$<TARGET_FILE_DIR:${name}>/${name}.map")
  set_target_properties(${name} PROPERTIES CROSSCOMPILING_EMULATOR "${KILN_FIRMWARE_RUNNER}")
  kiln_embedded_target(${name})
endfunction()
