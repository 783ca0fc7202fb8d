# Compile options shared by kiln's targets.

# Code that ships inside applications and firmware: runtime/, platform/ and
# the CPU kernels. C++17, no exceptions, no RTTI, warnings on.
function(kiln_embedded_target target)
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-fno-exceptions -fno-rtti -fno-threadsafe-statics>
    -Wall -Wextra -Wshadow -Wno-unused-parameter)
  if(CMAKE_CROSSCOMPILING)
    # newlib makes uint32_t `unsigned long` on Arm, so every "%u" handed a
    # uint32_t warns there, although both are 32 bits and passed alike. The
    # host build checks the same format strings, where widths really differ.
    target_compile_options(${target} PRIVATE -Wno-format)
  endif()
  if(NOT KILN_ENABLE_LOGGING)
    target_compile_definitions(${target} PUBLIC KILN_ENABLE_LOGGING=0)
  endif()
endfunction()

# Host tools and tests: the planner may use C++20 and the standard library.
function(kiln_host_target target)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()
