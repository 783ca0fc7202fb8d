// Error codes of the runtime. Every fallible runtime function returns an
// Error or a Result<T>; nothing throws. The detailed, human-readable reason
// (which tensor, arena or operator, what was expected) goes to the platform
// log at the place the error is detected; the code says what kind of failure
// it was so callers can react to it (check.h has the macros that do both in
// one statement). An Error must be looked at: the type is [[nodiscard]], so
// ignoring one is a compiler warning; cast to (void) where that is meant.

#ifndef KILN_RUNTIME_ERROR_H_
#define KILN_RUNTIME_ERROR_H_

#include <stdint.h>

namespace kiln {

enum class [[nodiscard]] Error : uint32_t{
    kOk = 0,
    // An argument from the application is wrong (null pointer, index out of range).
    kInvalidArgument,
    // The program failed structural (flatbuffer) or semantic verification.
    kInvalidProgram,
    // The program was written for another schema version.
    kVersionMismatch,
    // No method of that name.
    kNotFound,
    // An operator of the program has no kernel in the registry.
    kKernelNotFound,
    // The kernel registry is full.
    kRegistryFull,
    // The bookkeeping allocator ran out of bytes.
    kOutOfMemory,
    // An arena handed to the method is missing, too small or misaligned.
    kArenaMissing,
    kArenaTooSmall,
    kArenaMisaligned,
    // A bound input or output does not match what the method expects.
    kDTypeMismatch,
    kShapeMismatch,
    kBufferTooSmall,
    kBufferMisaligned,
    // A method input or output was not bound before execute().
    kNotBound,
    // Memory of one device was given where another device's was expected.
    kDeviceMismatch,
    // No backend registered for a delegate, or it failed to initialise.
    kBackendNotFound,
    kDelegateInitFailed,
    kDeviceAllocationFailed,
    kDeviceError,
    // A kernel found data it cannot process (an index out of range).
    kInvalidInput,
    // Reading a file failed.
    kIoError,
    kNotSupported,
    kInternal,
    // A collective's group does not match the program (rank count, layout of
    // a symmetric arena), or a peer rank failed, exited or timed out.
    kCommunicatorMismatch,
    kPeerFailed,
};

// A stable name for the code, such as "ArenaTooSmall". Never null.
const char* error_name(Error error);

}  // namespace kiln

#endif  // KILN_RUNTIME_ERROR_H_
