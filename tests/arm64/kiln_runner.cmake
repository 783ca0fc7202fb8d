# kiln-runner (kiln_runner.cc): runs programs planned on another machine,
# with the runtime, the platform layer and the CPU kernels only (no
# ONNX, no protobuf, no flatc where the schema headers are given:
# schema/CMakeLists.txt). Included by the arm64 tests (this folder) and by a
# native build without the planner (KILN_BUILD_RUNNER), where the CUDA
# backend joins it: its GPU build where built (KILN_WITH_CUDA), and the host
# execution model (KILN_CUDA_EXECUTION=host), so that the cases a bundle
# carries to a GPU machine (bench/cuda_bundle.sh) run through the same
# runner there and here.
add_executable(kiln_runner ${CMAKE_CURRENT_LIST_DIR}/kiln_runner.cc)
set_target_properties(kiln_runner PROPERTIES OUTPUT_NAME kiln-runner RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
target_link_libraries(kiln_runner PRIVATE kiln_cpu_kernels kiln_runtime kiln_platform)
kiln_host_target(kiln_runner)
foreach(flavor hostexec gpu)
  set(lib kiln_cuda)
  if(flavor STREQUAL "hostexec")
    set(lib kiln_cuda_hostexec)
  endif()
  if(TARGET ${lib})
    add_library(kiln_runner_cuda_${flavor} STATIC ${CMAKE_CURRENT_LIST_DIR}/runner_cuda.cc)
    target_link_libraries(kiln_runner_cuda_${flavor} PUBLIC ${lib})
    if(flavor STREQUAL "hostexec")
      target_compile_definitions(kiln_runner_cuda_${flavor} PRIVATE KILN_CUDA_HOSTEXEC=1)
    endif()
    kiln_host_target(kiln_runner_cuda_${flavor})
    string(TOUPPER ${flavor} upper)
    target_link_libraries(kiln_runner PRIVATE kiln_runner_cuda_${flavor})
    target_compile_definitions(kiln_runner PRIVATE KILN_RUNNER_CUDA_${upper}=1)
  endif()
endforeach()
# Programs planned for several ranks: their CUDA collectives through the
# cuda-ipc communicator (comm/cuda_ipc), in each CUDA flavour built.
if(TARGET kiln_comm_cuda_ipc_hostexec AND TARGET kiln_runner_cuda_hostexec)
  target_link_libraries(kiln_runner PRIVATE kiln_comm_cuda_ipc_hostexec)
  target_compile_definitions(kiln_runner PRIVATE KILN_RUNNER_CUDA_IPC=1)
endif()
if(TARGET kiln_comm_cuda_ipc_gpu AND TARGET kiln_runner_cuda_gpu)
  target_link_libraries(kiln_runner PRIVATE kiln_comm_cuda_ipc_gpu)
  target_compile_definitions(kiln_runner PRIVATE KILN_RUNNER_CUDA_IPC=1 KILN_RUNNER_CUDA_IPC_GPU=1)
endif()
# kiln-runner all-reduce-bench (bench/cuda_allreduce), in each flavour built.
foreach(flavor hostexec gpu)
  if(TARGET kiln_allreduce_bench_${flavor} AND TARGET kiln_runner_cuda_${flavor})
    string(TOUPPER ${flavor} upper)
    target_link_libraries(kiln_runner PRIVATE kiln_allreduce_bench_${flavor})
    target_compile_definitions(kiln_runner PRIVATE KILN_RUNNER_ALLREDUCE_BENCH_${upper}=1)
  endif()
endforeach()
# The Vulkan backend where built (KILN_WITH_VULKAN): programs planned for
# vulkan:N run too (bench/cuda_gpu.sh runs them on the GPU beside CUDA).
if(TARGET kiln_vulkan)
  target_link_libraries(kiln_runner PRIVATE kiln_vulkan)
  target_compile_definitions(kiln_runner PRIVATE KILN_RUNNER_VULKAN=1)
endif()
