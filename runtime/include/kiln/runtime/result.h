// Result<T>: a value or an Error, never both, never "Ok" as its error.
//
//   Result<Program> program = Program::load(loader);
//   if (!program.ok()) return program.error();
//
// The macros below return early on failure:
//
//   KILN_RETURN_IF_ERROR(method.set_input(0, data, size));
//   KILN_ASSIGN_OR_RETURN(Program program, Program::load(loader));
//
// A Result must be looked at ([[nodiscard]]). Reading the value of a failed
// Result, or making a Result from Error::kOk, is a programming mistake:
// builds without NDEBUG end the program there (KILN_DEBUG_CHECK below).

#ifndef KILN_RUNTIME_RESULT_H_
#define KILN_RUNTIME_RESULT_H_

#include <new>
#include <type_traits>
#include <utility>

#include "kiln/runtime/error.h"

namespace kiln {
namespace internal {

// Logs "check failed: <condition>" at file:line, then kiln_pal_abort().
[[noreturn]] void debug_check_failed(const char* file, int line, const char* condition);

}  // namespace internal
}  // namespace kiln

// For programming mistakes in code that uses the runtime (reading the value
// of a failed Result): without NDEBUG it logs and ends the program through
// kiln_pal_abort(); with NDEBUG (release and firmware builds) it is nothing.
#if defined(NDEBUG)
#define KILN_DEBUG_CHECK(cond) ((void)0)
#else
#define KILN_DEBUG_CHECK(cond) ((cond) ? (void)0 : ::kiln::internal::debug_check_failed(__FILE__, __LINE__, #cond))
#endif

namespace kiln {

template <typename T>
class [[nodiscard]] Result {
 public:
  static_assert(!std::is_reference<T>::value, "Result holds values, not references");

  Result(const T& value) : has_value_(true) { new (&value_) T(value); }        // NOLINT: implicit
  Result(T&& value) : has_value_(true) { new (&value_) T(std::move(value)); }  // NOLINT
  // An Error of kOk is a programming mistake: caught in debug builds, and
  // stored as kInternal otherwise, so a Result never reports success
  // without a value.
  Result(Error error)  // NOLINT: implicit
      : error_(error == Error::kOk ? Error::kInternal : error), has_value_(false) {
    KILN_DEBUG_CHECK(error != Error::kOk);
  }

  Result(Result&& other) noexcept : has_value_(other.has_value_) {
    if (has_value_) {
      new (&value_) T(std::move(other.value_));
    } else {
      error_ = other.error_;
    }
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  Result& operator=(Result&&) = delete;

  ~Result() {
    if (has_value_) value_.~T();
  }

  bool ok() const { return has_value_; }
  Error error() const { return has_value_ ? Error::kOk : error_; }

  // Only valid when ok(); checked in debug builds.
  T& get() & {
    KILN_DEBUG_CHECK(has_value_);
    return value_;
  }
  const T& get() const& {
    KILN_DEBUG_CHECK(has_value_);
    return value_;
  }
  T&& get() && {
    KILN_DEBUG_CHECK(has_value_);
    return std::move(value_);
  }
  T* operator->() { return &get(); }
  const T* operator->() const { return &get(); }
  T& operator*() & { return get(); }
  const T& operator*() const& { return get(); }

 private:
  union {
    T value_;
    Error error_;
  };
  bool has_value_;
};

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

// Returns the Error of `expr` (an expression of type Error) unless it is kOk.
// Does not log: whoever produced the Error logged it.
#define KILN_RETURN_IF_ERROR(expr)                             \
  do {                                                         \
    const ::kiln::Error kiln_error_ = (expr);                  \
    if (kiln_error_ != ::kiln::Error::kOk) return kiln_error_; \
  } while (0)

// Evaluates `expr` (a Result<T>); on failure returns its Error (not logged
// again), else moves the value into `lhs` (a declaration or an assignable
// name).
#define KILN_ASSIGN_OR_RETURN(lhs, expr) KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_result_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.error();                \
  lhs = std::move(tmp).get()

#endif  // KILN_RUNTIME_RESULT_H_
