#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"

namespace kiln::planner {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};

constexpr NpyType kTypes[] = {
    {"<f4", DType::FLOAT32}, {"<f8", DType::FLOAT64}, {"<f2", DType::FLOAT16}, {"<i8", DType::INT64},
    {"<i4", DType::INT32},   {"<i2", DType::INT16},   {"|i1", DType::INT8},    {"<u8", DType::UINT64},
    {"<u4", DType::UINT32},  {"<u2", DType::UINT16},  {"|u1", DType::UINT8},   {"|b1", DType::BOOL},
};

// Value of `key` in the header dict: the text after "'key':" up to the next
// top-level comma or the closing brace.
std::string header_field(const std::string& header, const std::string& key, const std::string& what) {
  const std::string needle = "'" + key + "'";
  size_t pos = header.find(needle);
  if (pos == std::string::npos) fail(what, ": .npy header has no '", key, "'");
  pos = header.find(':', pos + needle.size());
  if (pos == std::string::npos) fail(what, ": malformed .npy header");
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  size_t end = pos;
  int depth = 0;
  while (end < header.size()) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' && depth == 0) || (c == '}' && depth == 0)) break;
    ++end;
  }
  return header.substr(pos, end - pos);
}

}  // namespace

HostTensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) {
    fail(what, ": not a .npy file");
  }
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(what, ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    fail(what, ": unsupported .npy version ", int{major});
  }
  if (header_start + header_len > bytes.size()) fail(what, ": truncated .npy header");
  const std::string header = bytes.substr(header_start, header_len);
  std::string descr = header_field(header, "descr", what);
  descr = descr.substr(1, descr.size() >= 2 ? descr.size() - 2 : 0);  // strip quotes
  if (header_field(header, "fortran_order", what).rfind("False", 0) != 0) {
    fail(what, ": Fortran-ordered arrays are not supported");
  }
  HostTensor t;
  bool found = false;
  for (const NpyType& type : kTypes) {
    if (descr == type.descr) {
      t.dtype = type.dtype;
      found = true;
    }
  }
  if (!found) fail(what, ": unsupported .npy dtype '", descr, "'");
  std::string shape = header_field(header, "shape", what);
  std::vector<int64_t> dims;
  std::string digits;
  for (char c : shape) {
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (!digits.empty()) {
      dims.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  t.shape = dims;
  const size_t nbytes = static_cast<size_t>(t.numel()) * dtype_bytes(t.dtype);
  const size_t data_start = header_start + header_len;
  if (bytes.size() - data_start < nbytes) {
    fail(what, ": .npy data is ", bytes.size() - data_start, " bytes, shape ", shape_str(dims), " of ",
         dtype_str(t.dtype), " needs ", nbytes);
  }
  t.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_start),
                 bytes.begin() + static_cast<std::ptrdiff_t>(data_start + nbytes));
  return t;
}

HostTensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

void write_npy(const std::string& path, const HostTensor& tensor) {
  const char* descr = nullptr;
  for (const NpyType& type : kTypes) {
    if (type.dtype == tensor.dtype) descr = type.descr;
  }
  if (descr == nullptr) fail(path, ": cannot write ", dtype_str(tensor.dtype), " as .npy");
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.shape.size(); ++i) h << (i ? ", " : "") << tensor.shape[i];
  h << (tensor.shape.size() == 1 ? ",), }" : "), }");
  std::string header = h.str();
  // Pad so the data starts at a multiple of 64 bytes.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
  write_file_atomic(path, out);
}

}  // namespace kiln::planner
