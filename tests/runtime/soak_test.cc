// A soak: one program executed a million times in one process, as an
// application that runs for months would, with the process's resident
// memory, open file descriptors and threads sampled as it goes. After a
// warm-up each must stay flat (descriptors and threads exactly, resident
// anonymous memory within --rss-slack-kib, default 64), and every run's
// outputs must be the bits the first run gave for the same input (two
// inputs in turn). The program is a small CNN (convolutions, pooling, a
// classifier) executed on a PosixThreadPool of two threads, so the pool's
// calls, sleeps and wake-ups are soaked too.
//
//   runtime_soak [--runs N] [--seconds S] [--threads T] [--rss-slack-kib K]
//                [--leak memory|fd|thread]
//
// Stops after N runs (default 1,000,000) or S seconds, whichever comes
// first, and prints the runs, the time and each figure at the warm-up and
// at the end. --leak makes every run leak a little (4 KiB touched, a file
// descriptor, a sleeping thread every 1,000 runs), so the checks can be
// seen to fail (ctest runtime.soak_catches_*). Exit status 0 when flat and
// identical, 1 otherwise, 2 on bad arguments.

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/posix_thread_pool.h"
#include "kiln/runtime/program.h"
#include "ops/host_kernels.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace kiln::testing {
namespace {

// What the process holds, from /proc/self.
struct Usage {
  long rss_kib = 0;
  long fds = 0;
  long threads = 0;
};

// The larger of each figure.
Usage most_of(const Usage& a, const Usage& b) {
  return {a.rss_kib > b.rss_kib ? a.rss_kib : b.rss_kib, a.fds > b.fds ? a.fds : b.fds,
          a.threads > b.threads ? a.threads : b.threads};
}

// Resident anonymous memory (heap, stacks, arenas: what a leak grows; the
// file-backed pages of the libraries' code come in as code paths first run),
// from /proc/self/status, and the open descriptors in /proc/self/fd.
Usage usage() {
  Usage u;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++u.fds;
    }
    closedir(d);
    --u.fds;  // the directory's own descriptor
  }
  if (FILE* f = fopen("/proc/self/status", "r")) {
    char line[256];
    while (fgets(line, sizeof line, f) != nullptr) {
      if (strncmp(line, "RssAnon:", 8) == 0) u.rss_kib = atol(line + 8);
      if (strncmp(line, "Threads:", 8) == 0) u.threads = atol(line + 8);
    }
    fclose(f);
  }
  return u;
}

HostTensor noise(std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001) / 1000.f - 1.f;
  }
  return HostTensor::from_floats(v, shape);
}

std::string cnn_program() {
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 16, 16});
  int y = b.node("Relu", {b.node("Conv", {x, b.ramp("w1", {8, 3, 3, 3}, 0.05f), b.ramp("b1", {8})},
                                 {{"pads", ints_attr({1, 1, 1, 1})}})});
  y = b.node("MaxPool", {y}, {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
  y = b.node("Relu", {b.node("Conv", {y, b.ramp("w2", {16, 8, 3, 3}, 0.05f)}, {{"pads", ints_attr({1, 1, 1, 1})}})});
  y = b.node("Flatten", {b.node("GlobalAveragePool", {y})});
  b.output(b.node("Softmax", {b.node("Gemm", {y, b.ramp("fc", {16, 10}, 0.1f), b.ramp("fb", {10})})}));
  return b.plan().bytes;
}

struct Options {
  long long runs = 1000000;
  double seconds = 1e9;
  int threads = 2;
  long rss_slack_kib = 64;
  std::string leak;
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--runs") {
      o->runs = atoll(v.c_str());
    } else if (a == "--seconds") {
      o->seconds = atof(v.c_str());
    } else if (a == "--threads") {
      o->threads = atoi(v.c_str());
    } else if (a == "--rss-slack-kib") {
      o->rss_slack_kib = atol(v.c_str());
    } else if (a == "--leak" && (v == "memory" || v == "fd" || v == "thread")) {
      o->leak = v;
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && o->runs > 0 && o->seconds > 0 && o->threads >= 1 &&
         o->threads <= PosixThreadPool::kMaxThreads;
}

// What --leak leaks on run `r`.
char* volatile g_leaked = nullptr;  // so that the compiler keeps the leak
void leak(const std::string& what, long long r) {
  if (what == "memory") {
    char* p = static_cast<char*>(malloc(4096));
    memset(p, 1, 4096);  // resident, never freed
    g_leaked = p;
  } else if (what == "fd") {
    (void)open("/dev/null", O_RDONLY);  // never closed
  } else if (what == "thread" && r % 1000 == 0) {
    std::thread([] { sleep(1000000); }).detach();
  }
}

void print_usage(const char* when, const Usage& u) {
  printf("  %-8s resident %ld KiB (anonymous), %ld file descriptors, %ld threads\n", when, u.rss_kib, u.fds, u.threads);
}

int soak(const Options& o) {
  const std::string bytes = cnn_program();
  LoadedProgram loaded(bytes);
  if (!loaded.program.ok()) return printf("FAIL: the program does not load\n"), 1;
  const Program& program = loaded.program.get();
  MethodMemory memory(program.method_meta("forward").get());
  Result<Method> method = program.load_method("forward", memory.manager(), planner::host_kernel_registry());
  if (!method.ok()) return printf("FAIL: the method does not load: %s\n", error_name(method.error())), 1;
  PosixThreadPool pool;
  if (o.threads > 1) {
    if (pool.start(o.threads) != Error::kOk) return printf("FAIL: no pool of %d threads\n", o.threads), 1;
    method->set_thread_pool(&pool);
  }
  const HostTensor inputs[2] = {noise({1, 3, 16, 16}, 1), noise({1, 3, 16, 16}, 2)};
  std::vector<float> output(10);
  if (method->set_output(0, output.data(), output.size() * sizeof(float)) != Error::kOk) return 1;
  std::vector<float> first[2] = {output, output};  // sized once: the loop allocates nothing

  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // Warm-up: the first 1,000 runs (or a tenth) fault in every page the
  // runs will ever touch.
  const long long warm_up = o.runs / 10 < 1000 ? o.runs / 10 : 1000;
  Usage at_warm_up, last, most;
  long long r = 0, wrong = 0;
  for (; r < o.runs; ++r) {
    const HostTensor& x = inputs[r % 2];
    if (method->set_input(0, x.bytes.data(), x.bytes.size()) != Error::kOk || method->execute() != Error::kOk) {
      printf("FAIL: run %lld did not execute\n", r);
      return 1;
    }
    if (r < 2) first[r] = output;
    if (memcmp(output.data(), first[r % 2].data(), output.size() * sizeof(float)) != 0 && wrong++ == 0) {
      printf("FAIL: run %lld's outputs differ from run %lld's\n", r, r % 2);
    }
    if (!o.leak.empty()) leak(o.leak, r);
    if (r == warm_up) {
      (void)usage();  // faults in the pages its own reading needs
      most = at_warm_up = usage();
    }
    if (r > warm_up && r % 4096 == 0) {
      most = most_of(most, usage());
      if (elapsed() > o.seconds) break;
    }
  }
  const double seconds = elapsed();
  last = usage();
  most = most_of(most, last);
  const long long runs = r < o.runs ? r + 1 : r;
  printf("soak: %lld runs in %.1f s (%.0f runs/s) on %d thread%s, outputs %s\n", runs, seconds, runs / seconds,
         o.threads, o.threads > 1 ? "s" : "", wrong == 0 ? "identical on every run" : "DIFFERENT");
  print_usage("warm-up", at_warm_up);
  print_usage("end", last);
  print_usage("most", most);
  bool ok = wrong == 0;
  if (most.rss_kib - at_warm_up.rss_kib > o.rss_slack_kib) {
    printf("FAIL: resident memory grew by %ld KiB after the warm-up (allowed %ld)\n", most.rss_kib - at_warm_up.rss_kib,
           o.rss_slack_kib);
    ok = false;
  }
  if (most.fds != at_warm_up.fds || last.fds != at_warm_up.fds) {
    printf("FAIL: file descriptors went from %ld to %ld at the end (%ld at most)\n", at_warm_up.fds, last.fds,
           most.fds);
    ok = false;
  }
  if (most.threads != at_warm_up.threads || last.threads != at_warm_up.threads) {
    printf("FAIL: threads went from %ld to %ld at the end (%ld at most)\n", at_warm_up.threads, last.threads,
           most.threads);
    ok = false;
  }
  if (ok) printf("soak: resident memory, file descriptors and threads flat\n");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace kiln::testing

int main(int argc, char** argv) {
  kiln::testing::Options o;
  if (!kiln::testing::parse(argc, argv, &o)) {
    fprintf(stderr, "usage: %s [--runs N] [--seconds S] [--threads T] [--rss-slack-kib K] [--leak memory|fd|thread]\n",
            argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return kiln::testing::soak(o);
}
