// launch.cu for the host execution model (KILN_CUDA_HOSTEXEC=1): the same
// kernel source, compiled by the host compiler.

#include "launch.cu"
