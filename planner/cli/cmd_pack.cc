// kiln pack: turns a program into C source for firmware.
//
// Writes DIR/NAME.c, the program as one const array (it lands in flash with
// the rest of the read-only data; weights are then used in place), and
// DIR/NAME.h, which declares the array and gives, as integer constants, every
// figure an application needs to declare its buffers as static arrays: the
// size and alignment of each host arena, the method's bookkeeping bytes and
// the byte size of each input and output. The figures are read through the
// runtime's MethodMeta after Program::load has verified the program, so they
// are exactly what the runtime will check the buffers against.

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/pack_regions.h"
#include "cli/pack_shared.h"
#include "core/error.h"
#include "core/file_util.h"
#include "emit/program_file.h"
#include "kiln/kernels/cpu.h"
#include "kiln/runtime/program.h"
#include "kiln/runtime/self_test.h"

namespace kiln::planner::cli {
namespace {

constexpr const char* kHelp =
    "usage: kiln pack PROGRAM.kiln --c-array NAME -o DIR\n"
    "       kiln pack PROGRAM.kiln... --shared-arena NAME -o DIR\n"
    "\n"
    "Writes the program as C source for firmware: DIR/NAME.c holds it as a\n"
    "const, 64-byte aligned array (placed with the read-only data, in flash),\n"
    "and DIR/NAME.h declares that array and defines the exact byte size and\n"
    "alignment of every host arena of every method, the method's bookkeeping\n"
    "bytes and the byte size of each input and output, so the buffers can be\n"
    "static arrays sized at compile time (and a quantized input's or output's\n"
    "scale and zero point: kiln plan --quantized-io). DIR/NAME_kernels.cc defines\n"
    "NAME_register_kernels(), which registers the CPU kernels the program\n"
    "calls and no other, so the linker leaves every other kernel out of the image.\n"
    "\n"
    "options:\n"
    "  --c-array NAME   the C name of the array; a C identifier, also the file names\n"
    "                   and (upper-cased) the prefix of every constant in the header\n"
    "  -o DIR           the output folder (created if missing)\n"
    "  --self-test FILE also pack a bundled self-test (kiln plan --bundle-test): DIR/NAME_self_test.c\n"
    "                   holds it as a const array NAME_self_test, and DIR/NAME_self_test.h gives\n"
    "                   NAME_SELF_TEST_SIZE and NAME_SELF_TEST_SCRATCH_BYTES (the output scratch\n"
    "                   kiln::run_self_test needs), so firmware can check itself at boot\n"
    "  --section REGION=SECTION\n"
    "                   the linker section of memory region REGION's buffer (kiln plan\n"
    "                   --memory-region); every region gets a buffer NAME_region_REGION in\n"
    "                   DIR/NAME.c, in .bss unless a section is named (repeatable)\n\n"
    "  --shared-arena NAME  instead: DIR/NAME.h defines NAME_BYTES and NAME_ALIGNMENT, one\n"
    "                   buffer for the host arenas of every method of the programs given, which\n"
    "                   run one after another: the largest method's, not the sum\n";

// The array is at least this aligned, and at least as aligned as the
// program's data segment, so every constant keeps the alignment the planner
// gave it (the segment starts at an aligned offset of the file).
constexpr uint32_t kMinArrayAlignment = 64;

bool is_c_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// "forward" -> "FORWARD", "decode.step" -> "DECODE_STEP".
std::string macro_part(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  return out;
}

// An unsigned integer constant that is a valid C literal of the right width.
std::string literal(uint64_t value) { return std::to_string(value) + (value > 0xFFFFFFFFull ? "ull" : "u"); }

std::string device_name(const Device& device) {
  return str(device_type_name(device.type()), ":", static_cast<int>(device.index()));
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The program bytes, copied to 64-byte aligned memory as Program::load wants.
struct AlignedCopy {
  explicit AlignedCopy(const std::string& bytes)
      : storage(new uint64_t[bytes.size() / 8 + 9]),
        data(reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(storage.get()) + 63) & ~uintptr_t{63})) {
    std::memcpy(data, bytes.data(), bytes.size());
  }
  std::unique_ptr<uint64_t[]> storage;
  uint8_t* data;
};

class Writer {
 public:
  void line(const std::string& s = "") { text_ += s + "\n"; }
  // "#define NAME 123u", with the comment (if any) from column 57.
  void define(const std::string& name, uint64_t value, const std::string& comment = "") {
    std::string s = "#define " + name + " " + literal(value);
    if (!comment.empty()) s += std::string(s.size() < 56 ? 56 - s.size() : 1, ' ') + "/* " + comment + " */";
    line(s);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// The CPU kernels the program's methods call on the CPU, sorted.
// Delegates' kernels run on their backends and are not among them.
std::vector<std::string> cpu_kernels(const fb::Program& program, const std::string& path) {
  KernelRegistry cpu;
  if (register_cpu_kernels(cpu) != Error::kOk) fail("internal error: cannot list the CPU kernels");
  std::set<std::string> names;
  if (program.methods() != nullptr) {
    for (const fb::Method* method : *program.methods()) {
      if (method->operators() == nullptr) continue;
      for (const fb::Operator* op : *method->operators()) {
        const std::string name = op->name() != nullptr ? op->name()->str() : "";
        if (cpu.find(name.c_str()) == nullptr) {
          fail(path, ": operator '", name, "' is not a CPU kernel, so no registration can be written for it");
        }
        names.insert(name);
      }
    }
  }
  return {names.begin(), names.end()};
}

std::string kernels_text(const std::string& source_name, const std::string& name,
                         const std::vector<std::string>& kernels) {
  Writer w;
  w.line("// Generated by `kiln pack` from " + source_name + ". Do not edit.");
  w.line("//");
  w.line("// " + name + "_register_kernels() registers the " + std::to_string(kernels.size()) +
         " CPU kernels the program calls, and only");
  w.line("// those: with --gc-sections the linker leaves every other kernel out. Call it");
  w.line("// once, instead of kiln::register_cpu_kernels(), before loading a method.");
  w.line();
  w.line("#include \"" + name + ".h\"");
  w.line();
  w.line("namespace kiln::kernels {");
  for (const std::string& k : kernels) w.line("extern const KernelEntry kernel_" + k + ";");
  w.line("}  // namespace kiln::kernels");
  w.line();
  w.line("kiln::Error " + name + "_register_kernels(kiln::KernelRegistry& registry) {");
  w.line("  const kiln::KernelEntry* const kernels[] = {");
  for (const std::string& k : kernels) w.line("      &kiln::kernels::kernel_" + k + ",");
  w.line("  };");
  w.line("  for (const kiln::KernelEntry* kernel : kernels) {");
  w.line("    const kiln::Error error = registry.register_kernel(*kernel);");
  w.line("    if (error != kiln::Error::kOk) return error;");
  w.line("  }");
  w.line("  return kiln::Error::kOk;");
  w.line("}");
  return w.text();
}

// A quantized input or output's scale and zero point (real value =
// (q - ZERO_POINT) * SCALE), for firmware that quantizes its sensor data or
// reads the scores as reals.
void define_quantization(Writer& w, const std::string& name, const TensorInfo& info) {
  if (!info.quantized) return;
  char scale[32];
  std::snprintf(scale, sizeof(scale), "%.9ef", static_cast<double>(info.scale));
  w.line("#define " + name + "_SCALE " + scale);
  w.line("#define " + name + "_ZERO_POINT " + std::to_string(info.zero_point));
}

std::string header_text(const std::string& source_name, const std::string& name, const Program& program, uint64_t size,
                        uint32_t alignment, const std::string& regions) {
  const std::string prefix = macro_part(name);
  const std::string example = prefix + "_" + macro_part(program.method_name(0).get());
  Writer w;
  w.line("/* Generated by `kiln pack` from " + source_name + ". Do not edit.");
  w.line(" *");
  w.line(" * The program " + name + "[] (defined in " + name + ".c, const, so it stays in flash)");
  w.line(" * and the exact sizes of the memory its methods need, for buffers declared");
  w.line(" * as static arrays. For method \"" + std::string(program.method_name(0).get()) + "\", for example:");
  w.line(" *");
  w.line(" *   alignas(" + example + "_ARENA_0_ALIGNMENT) static uint8_t arena0[" + example + "_ARENA_0_SIZE];");
  w.line(" *   alignas(16) static uint8_t bookkeeping[" + example + "_BOOKKEEPING_BYTES];");
  w.line(" *");
  w.line(" * Arena numbers are the method's arena indices (the order of the spans in");
  w.line(" * the MemoryManager); only host (cpu) arenas are listed. */");
  w.line();
  w.line("#ifndef " + prefix + "_H_");
  w.line("#define " + prefix + "_H_");
  w.line();
  w.line("#include <stdint.h>");
  w.line();
  w.line("#ifdef __cplusplus");
  w.line("extern \"C\" {");
  w.line("#endif");
  w.line();
  w.define(prefix + "_SIZE", size, "bytes of the program");
  w.define(prefix + "_ALIGNMENT", alignment, "alignment of the array");
  w.define(prefix + "_NUM_METHODS", program.num_methods());
  for (size_t m = 0; m < program.num_methods(); ++m) {
    const char* method_name = program.method_name(m).get();
    const MethodMeta meta = program.method_meta(method_name).get();
    const std::string p = prefix + "_" + macro_part(method_name);
    w.line();
    w.line("/* method \"" + std::string(method_name) + "\" */");
    w.define(p + "_BOOKKEEPING_BYTES", meta.bookkeeping_bytes(), "16-byte aligned");
    w.define(p + "_NUM_ARENAS", meta.num_arenas(), "all devices");
    for (size_t a = 0; a < meta.num_arenas(); ++a) {
      const ArenaInfo arena = meta.arena(a).get();
      if (arena.device.type() != fb::DeviceType::CPU) {
        w.line("/* arena " + std::to_string(a) + " is on " + device_name(arena.device) +
               ": allocated by its backend, not here */");
        continue;
      }
      const std::string ap = p + "_ARENA_" + std::to_string(a);
      const std::string region = arena.region[0] != '\0' ? std::string("region '") + arena.region + "'" : "";
      w.define(ap + "_SIZE", arena.size, arena.kind == fb::ArenaKind::SYMMETRIC ? "symmetric" : region);
      w.define(ap + "_ALIGNMENT", arena.alignment);
    }
    if (program.flatbuffer()->arena_groups() != nullptr) {
      w.define(p + "_SHARED_ARENA_BYTES", program.shared_arena_bytes(method_name).get(),
               "one buffer for the host arenas of the methods of its arena group (split_host_arenas)");
    }
    w.define(p + "_NUM_INPUTS", meta.num_inputs());
    for (size_t i = 0; i < meta.num_inputs(); ++i) {
      const TensorInfo info = meta.input(i).get();
      w.define(p + "_INPUT_" + std::to_string(i) + "_BYTES", info.nbytes, std::string("'") + info.name + "'");
      define_quantization(w, p + "_INPUT_" + std::to_string(i), info);
    }
    w.define(p + "_NUM_OUTPUTS", meta.num_outputs());
    for (size_t i = 0; i < meta.num_outputs(); ++i) {
      const TensorInfo info = meta.output(i).get();
      w.define(p + "_OUTPUT_" + std::to_string(i) + "_BYTES", info.nbytes, std::string("'") + info.name + "'");
      define_quantization(w, p + "_OUTPUT_" + std::to_string(i), info);
    }
  }
  w.line();
  if (!regions.empty()) w.line(regions);
  w.line("extern const uint8_t " + name + "[" + prefix + "_SIZE];");
  w.line();
  w.line("#ifdef __cplusplus");
  w.line("}  /* extern \"C\" */");
  w.line();
  w.line("#include \"kiln/runtime/kernel.h\"");
  w.line();
  w.line("/* Defined in " + name + "_kernels.cc: registers the CPU kernels the program");
  w.line(" * calls, and no other. */");
  w.line("kiln::Error " + name + "_register_kernels(kiln::KernelRegistry& registry = kiln::global_kernel_registry());");
  w.line("#endif");
  w.line();
  w.line("#endif  /* " + prefix + "_H_ */");
  return w.text();
}

// `bytes` as the body of a C array initializer, 16 bytes a line.
void append_c_bytes(std::string& out, const std::string& bytes) {
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i % 16 == 0) out += "  ";
    const auto b = static_cast<unsigned char>(bytes[i]);
    out += "0x";
    out += kHex[b >> 4];
    out += kHex[b & 15];
    out += ',';
    out += (i % 16 == 15 || i + 1 == bytes.size()) ? '\n' : ' ';
  }
}

std::string source_text(const std::string& source_name, const std::string& name, const std::string& bytes,
                        uint32_t alignment, const std::string& regions) {
  std::string out;
  out.reserve(bytes.size() * 5 + bytes.size() / 16 * 4 + 1024);
  out += "/* Generated by `kiln pack` from " + source_name + ". Do not edit. */\n\n";
  out += "#include \"" + name + ".h\"\n\n";
  out += "_Alignas(" + std::to_string(alignment) + ") const uint8_t " + name + "[" + macro_part(name) + "_SIZE] = {\n";
  append_c_bytes(out, bytes);
  out += "};\n";
  return out + regions;
}

// NAME_self_test.h and NAME_self_test.c: a bundled self-test as a const array.
void write_self_test(const std::string& dir, const std::string& name, const std::string& test_path) {
  const std::string bytes = read_file(test_path);
  const AlignedCopy copy(bytes);
  Result<uint64_t> scratch = self_test_scratch_bytes(Span<const uint8_t>(copy.data, bytes.size()));
  if (!scratch.ok()) fail(test_path, ": not a kiln self-test (", error_name(scratch.error()), ")");
  const std::string array = name + "_self_test";
  const std::string macro = macro_part(name) + "_SELF_TEST";
  std::string header = "/* Generated by `kiln pack` from " + base_name(test_path) + ". Do not edit.\n";
  header += " * A bundled self-test: kiln::run_self_test(program, method, {" + array + ", " + macro +
            "_SIZE},\n *   scratch of " + macro + "_SCRATCH_BYTES, &report). */\n";
  header += "#ifndef " + macro + "_H_\n#define " + macro + "_H_\n\n#include <stdint.h>\n\n";
  header += "#define " + macro + "_SIZE " + std::to_string(bytes.size()) + "u\n";
  header += "#define " + macro + "_SCRATCH_BYTES " + std::to_string(scratch.get()) + "u\n\n";
  header += "#ifdef __cplusplus\nextern \"C\" {\n#endif\nextern const uint8_t " + array + "[" + macro +
            "_SIZE];\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  std::string source = "/* Generated by `kiln pack` from " + base_name(test_path) + ". Do not edit. */\n\n";
  source += "#include \"" + array + ".h\"\n\n_Alignas(64) const uint8_t " + array + "[" + macro + "_SIZE] = {\n";
  append_c_bytes(source, bytes);
  source += "};\n";
  write_file_atomic(dir + "/" + array + ".h", header);
  write_file_atomic(dir + "/" + array + ".c", source);
  std::printf("packed self-test %s as %s/%s.c and %s/%s.h\n", test_path.c_str(), dir.c_str(), array.c_str(),
              dir.c_str(), array.c_str());
}

}  // namespace

int cmd_pack(const Argv& argv) {
  const Args args(argv, {{"--c-array", true},
                         {"-o", true},
                         {"--self-test", true},
                         {"--section", true},
                         {"--shared-arena", true},
                         {"--help", false}});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.has("--shared-arena")) return pack_shared_arena(args);
  if (args.positional().size() != 1) throw UsageError{"expects one program file"};
  if (!args.has("--c-array")) throw UsageError{"--c-array NAME is required"};
  if (!args.has("-o")) throw UsageError{"-o DIR is required"};
  const std::string path = args.positional()[0];
  const std::string name = args.get("--c-array");
  const std::string dir = args.get("-o");
  if (!is_c_identifier(name)) throw UsageError{"--c-array '" + name + "' is not a C identifier"};

  const std::string bytes = read_file(path);
  const ProgramFile file(bytes, path);  // a kiln program at all? (names the file if not)
  const AlignedCopy copy(bytes);
  BufferDataLoader loader(copy.data, bytes.size());
  Result<Program> loaded = Program::load(loader);
  if (!loaded.ok()) fail(path, ": the runtime refuses this program (", error_name(loaded.error()), ")");
  const Program& program = loaded.get();
  if (program.num_methods() == 0) fail(path, ": the program has no method");

  const uint32_t segment_alignment = file.program().segment_alignment();
  if (segment_alignment == 0 || (segment_alignment & (segment_alignment - 1)) != 0) {
    fail(path, ": segment alignment ", segment_alignment, " is not a power of two");
  }
  const uint32_t alignment = std::max(kMinArrayAlignment, segment_alignment);
  std::set<std::string> prefixes;
  for (size_t m = 0; m < program.num_methods(); ++m) {
    const std::string method_name = program.method_name(m).get();
    if (!prefixes.insert(macro_part(method_name)).second) {
      fail(path, ": methods '", method_name, "' and another one give the same macro name ", macro_part(name), "_",
           macro_part(method_name));
    }
  }

  const std::vector<std::string> kernels = cpu_kernels(file.program(), path);
  const std::vector<PackRegion> regions = pack_regions(program, name, args.all("--section"));

  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (mkdir(dir.c_str(), 0755) != 0) fail(dir, ": cannot create the output directory");
  } else if (!S_ISDIR(st.st_mode)) {
    fail(dir, ": not a directory");
  }
  const std::string source_name = base_name(path);
  write_file_atomic(dir + "/" + name + ".h",
                    header_text(source_name, name, program, bytes.size(), alignment, region_header_text(regions)));
  write_file_atomic(dir + "/" + name + ".c",
                    source_text(source_name, name, bytes, alignment, region_source_text(regions)));
  write_file_atomic(dir + "/" + name + "_kernels.cc", kernels_text(source_name, name, kernels));
  if (args.has("--self-test")) write_self_test(dir, name, args.get("--self-test"));

  std::printf("packed %s (%s bytes) as %s/%s.c, %s/%s.h and %s/%s_kernels.cc\n", path.c_str(),
              group_digits(bytes.size()).c_str(), dir.c_str(), name.c_str(), dir.c_str(), name.c_str(), dir.c_str(),
              name.c_str());
  std::printf("  kernels: %zu (", kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k) std::printf("%s%s", k == 0 ? "" : ", ", kernels[k].c_str());
  std::printf(")\n");
  for (size_t m = 0; m < program.num_methods(); ++m) {
    const char* method_name = program.method_name(m).get();
    const MethodMeta meta = program.method_meta(method_name).get();
    std::printf("  method '%s': bookkeeping %s bytes", method_name, group_digits(meta.bookkeeping_bytes()).c_str());
    for (size_t a = 0; a < meta.num_arenas(); ++a) {
      const ArenaInfo arena = meta.arena(a).get();
      std::printf(", arena %zu %s bytes on %s", a, group_digits(arena.size).c_str(), device_name(arena.device).c_str());
    }
    std::printf("\n");
  }
  for (const PackRegion& r : regions) {
    std::printf("  region '%s': %s[%s] (%s bytes)%s%s\n", r.name.c_str(), r.symbol.c_str(), r.macro.c_str(),
                group_digits(r.size).c_str(), r.section.empty() ? "" : " in section ", r.section.c_str());
  }
  return 0;
}

}  // namespace kiln::planner::cli
