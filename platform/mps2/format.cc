// A heap-free printf formatter for bare-metal builds, and the vsnprintf the
// runtime's log calls.
//
// Why not newlib's: newlib-nano's vsnprintf shares its code with the
// growable string streams of asprintf, so linking it pulls in realloc and
// free -- and a firmware that links the heap fails kiln's no-heap link check.
// Defining vsnprintf here keeps newlib's copy out of the image (the linker
// takes the first definition it finds, and the platform library comes before
// libc). snprintf, printf and the rest of newlib's stdio are not replaced:
// a firmware that calls them links the heap and is refused.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/platform/mps2.h"

namespace {

// Appends characters to a bounded buffer, counting the ones that did not fit
// so the return value is the length of the whole text, as vsnprintf's is.
class Output {
 public:
  Output(char* out, size_t size) : out_(out), size_(size) {}

  void put(char c) {
    if (length_ + 1 < size_) out_[length_] = c;
    ++length_;
  }
  void put(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) put(s[i]);
  }
  void repeat(char c, int n) {
    for (int i = 0; i < n; ++i) put(c);
  }
  size_t finish() {
    if (size_ > 0) out_[length_ < size_ ? length_ : size_ - 1] = '\0';
    return length_;
  }

 private:
  char* out_;
  size_t size_;
  size_t length_ = 0;
};

struct Spec {
  bool left = false;
  bool zero = false;
  int width = 0;
  int precision = -1;
};

// Writes `body` (of length n) with an optional sign or prefix, padded to the
// spec's width: spaces on the left or right, or zeros after the sign.
void emit_padded(Output& out, const Spec& spec, const char* prefix, const char* body, int n) {
  int prefix_length = 0;
  while (prefix[prefix_length] != '\0') ++prefix_length;
  int padding = spec.width - prefix_length - n;
  if (padding < 0) padding = 0;
  if (!spec.left && !spec.zero) out.repeat(' ', padding);
  out.put(prefix, static_cast<size_t>(prefix_length));
  if (!spec.left && spec.zero) out.repeat('0', padding);
  out.put(body, static_cast<size_t>(n));
  if (spec.left) out.repeat(' ', padding);
}

// Digits of `value` in `base`, most significant first, into the end of
// `buffer`; returns where they start.
char* digits(uint64_t value, unsigned base, bool upper, char* end) {
  const char* set = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  char* p = end;
  do {
    *--p = set[value % base];
    value /= base;
  } while (value != 0);
  return p;
}

void emit_integer(Output& out, Spec spec, uint64_t magnitude, bool negative, unsigned base, bool upper,
                  const char* prefix) {
  char buffer[24];
  char* end = buffer + sizeof(buffer);
  char* start = digits(magnitude, base, upper, end);
  // An explicit precision is a minimum digit count and turns off zero padding.
  if (spec.precision >= 0) {
    spec.zero = false;
    if (spec.precision == 0 && magnitude == 0) start = end;
    while (end - start < spec.precision && start > buffer) *--start = '0';
  }
  emit_padded(out, spec, negative ? "-" : prefix, start, static_cast<int>(end - start));
}

// %f with single-precision arithmetic: the integer part as a 32-bit number,
// the fraction scaled by 10^precision and rounded. Magnitudes of 2^32 and
// more are shown as d.ddddde+XX instead.
void emit_float(Output& out, Spec spec, float value) {
  const char* sign = value < 0.0f ? "-" : "";
  float magnitude = value < 0.0f ? -value : value;
  if (magnitude != magnitude) {
    emit_padded(out, Spec{spec.left, false, spec.width, -1}, "", "nan", 3);
    return;
  }
  if (magnitude > 3.4028235e38f) {
    emit_padded(out, Spec{spec.left, false, spec.width, -1}, sign, "inf", 3);
    return;
  }
  int precision = spec.precision < 0 ? 6 : (spec.precision > 7 ? 7 : spec.precision);
  int exponent = 0;
  bool scientific = magnitude >= 4294967296.0f;
  while (magnitude >= 10.0f && scientific) {
    magnitude /= 10.0f;
    ++exponent;
  }
  uint32_t scale = 1;
  for (int i = 0; i < precision; ++i) scale *= 10;
  uint32_t integer = static_cast<uint32_t>(magnitude);
  uint32_t fraction =
      static_cast<uint32_t>((magnitude - static_cast<float>(integer)) * static_cast<float>(scale) + 0.5f);
  if (fraction >= scale) {
    fraction -= scale;
    ++integer;
  }
  char buffer[40];
  char* end = buffer + sizeof(buffer);
  char* p = end;
  if (scientific) {
    p = digits(static_cast<uint64_t>(exponent), 10, false, p);
    if (exponent < 10) *--p = '0';
    *--p = '+';
    *--p = 'e';
  }
  if (precision > 0) {
    char* fraction_end = p;
    p = digits(fraction, 10, false, p);
    while (fraction_end - p < precision) *--p = '0';
    *--p = '.';
  }
  p = digits(integer, 10, false, p);
  emit_padded(out, Spec{spec.left, spec.zero, spec.width, -1}, sign, p, static_cast<int>(end - p));
}

// Reads the flags, width and precision of a conversion (`f` just after its
// '%') into `spec`, taking a '*' width or precision from `args`; returns
// where the length modifier or conversion starts.
const char* parse_spec(const char* f, va_list* args, Spec& spec) {
  for (;; ++f) {
    if (*f == '-') {
      spec.left = true;
    } else if (*f == '0') {
      spec.zero = true;
    } else if (*f == '+' || *f == ' ' || *f == '#') {
      // Accepted and ignored: the runtime's messages do not use them.
    } else {
      break;
    }
  }
  if (*f == '*') {
    spec.width = va_arg(*args, int);
    if (spec.width < 0) {
      spec.left = true;
      spec.width = -spec.width;
    }
    ++f;
  } else {
    while (*f >= '0' && *f <= '9') spec.width = spec.width * 10 + (*f++ - '0');
  }
  if (*f == '.') {
    ++f;
    spec.precision = 0;
    if (*f == '*') {
      spec.precision = va_arg(*args, int);
      ++f;
    } else {
      while (*f >= '0' && *f <= '9') spec.precision = spec.precision * 10 + (*f++ - '0');
    }
  }
  if (spec.left) spec.zero = false;
  return f;
}

// Reads a length modifier into `length`: -2 char, -1 short, 0 int, 1 long,
// 2 long long; size_t, intmax_t and ptrdiff_t map onto whichever of those
// has their width. Returns where the conversion character is.
const char* parse_length(const char* f, int& length) {
  length = 0;
  if (*f == 'h') {
    ++f;
    length = -1;
    if (*f == 'h') {
      ++f;
      length = -2;
    }
  } else if (*f == 'l') {
    ++f;
    length = 1;
    if (*f == 'l') {
      ++f;
      length = 2;
    }
  } else if (*f == 'z' || *f == 't') {
    ++f;
    length = sizeof(size_t) == sizeof(long long) ? 2 : (sizeof(size_t) == sizeof(long) ? 1 : 0);
  } else if (*f == 'j') {
    ++f;
    length = 2;
  }
  return f;
}

// %d and %i, %u, %x, %X and %o: the argument of the given length.
void emit_integer_argument(Output& out, char conversion, const Spec& spec, int length, va_list* args) {
  if (conversion == 'd' || conversion == 'i') {
    long long v = length == 2 ? va_arg(*args, long long) : length == 1 ? va_arg(*args, long) : va_arg(*args, int);
    if (length == -1) v = static_cast<short>(v);
    if (length == -2) v = static_cast<signed char>(v);
    uint64_t magnitude = v < 0 ? 0ull - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    emit_integer(out, spec, magnitude, v < 0, 10, false, "");
    return;
  }
  unsigned long long v = length == 2   ? va_arg(*args, unsigned long long)
                         : length == 1 ? va_arg(*args, unsigned long)
                                       : va_arg(*args, unsigned);
  if (length == -1) v = static_cast<unsigned short>(v);
  if (length == -2) v = static_cast<unsigned char>(v);
  unsigned base = conversion == 'u' ? 10 : (conversion == 'o' ? 8 : 16);
  emit_integer(out, spec, v, false, base, conversion == 'X', "");
}

// Writes one conversion with its argument from `args`. Returns false for a
// lone '%' at the end of the format (printed), where formatting stops.
bool emit_conversion(Output& out, char conversion, const Spec& spec, int length, va_list* args) {
  switch (conversion) {
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': emit_integer_argument(out, conversion, spec, length, args); break;
    case 'p':
      emit_integer(out, Spec{}, reinterpret_cast<uintptr_t>(va_arg(*args, void*)), false, 16, false, "0x");
      break;
    case 'c': {
      char c = static_cast<char>(va_arg(*args, int));
      emit_padded(out, Spec{spec.left, false, spec.width, -1}, "", &c, 1);
      break;
    }
    case 's': {
      const char* s = va_arg(*args, const char*);
      if (s == nullptr) s = "(null)";
      int n = 0;
      while (s[n] != '\0' && (spec.precision < 0 || n < spec.precision)) ++n;
      emit_padded(out, Spec{spec.left, false, spec.width, -1}, "", s, n);
      break;
    }
    case 'f':
    case 'F': emit_float(out, spec, static_cast<float>(va_arg(*args, double))); break;
    case '%': out.put('%'); break;
    case '\0':
      // A lone '%' at the end: print it and stop.
      out.put('%');
      return false;
    default:
      // Unsupported conversion: show it rather than guess its argument.
      out.put('%');
      out.put(conversion);
      break;
  }
  return true;
}

}  // namespace

extern "C" {

int kiln_mps2_vformat(char* out_buffer, size_t size, const char* format, va_list args) {
  Output out(out_buffer, size);
  // The helpers read the arguments through a pointer to this copy (a
  // va_list parameter's own address has another type on some ABIs).
  va_list list;
  va_copy(list, args);
  for (const char* f = format; *f != '\0'; ++f) {
    if (*f != '%') {
      out.put(*f);
      continue;
    }
    Spec spec;
    int length = 0;
    f = parse_length(parse_spec(f + 1, &list, spec), length);
    if (!emit_conversion(out, *f, spec, length, &list)) break;
  }
  va_end(list);
  return static_cast<int>(out.finish());
}

int vsnprintf(char* out, size_t size, const char* format, va_list args) {
  return kiln_mps2_vformat(out, size, format, args);
}

}  // extern "C"
