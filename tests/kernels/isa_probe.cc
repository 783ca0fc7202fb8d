// kiln_isa_probe: says which CPU path the kernels take here, for the tests
// that run a suite under each path (run_with_isa.sh).
//
// usage: kiln_isa_probe            prints "processor P, active A" (A honours KILN_ISA)
//        kiln_isa_probe PATH       exits 0 when the processor can run PATH
//                                  (scalar, avx2, avx512), 77 with the reason
//                                  when it cannot, 2 for an unknown name

#include <cstdio>

#include "kiln/kernels/isa.h"

int main(int argc, char** argv) {
  namespace kk = kiln::kernels;
  const kk::Isa processor = kk::processor_isa();
  if (argc == 1) {
    std::printf("processor %s, active %s\n", kk::isa_name(processor), kk::isa_name(kk::active_isa()));
    return 0;
  }
  kk::Isa wanted;
  if (argc != 2 || !kk::parse_isa(argv[1], &wanted)) {
    std::fprintf(stderr, "usage: %s [scalar|avx2|avx512]\n", argv[0]);
    return 2;
  }
  if (wanted > processor) {
    std::printf("skipped: the %s path needs a processor with %s; this one's best path is %s\n", argv[1],
                wanted == kk::Isa::kAvx512 ? "AVX-512F" : "AVX2 and FMA", kk::isa_name(processor));
    return 77;
  }
  return 0;
}
