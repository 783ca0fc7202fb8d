#include "kiln/runtime/error.h"

namespace kiln {

const char* error_name(Error error) {
  switch (error) {
    case Error::kOk: return "Ok";
    case Error::kInvalidArgument: return "InvalidArgument";
    case Error::kInvalidProgram: return "InvalidProgram";
    case Error::kVersionMismatch: return "VersionMismatch";
    case Error::kNotFound: return "NotFound";
    case Error::kKernelNotFound: return "KernelNotFound";
    case Error::kRegistryFull: return "RegistryFull";
    case Error::kOutOfMemory: return "OutOfMemory";
    case Error::kArenaMissing: return "ArenaMissing";
    case Error::kArenaTooSmall: return "ArenaTooSmall";
    case Error::kArenaMisaligned: return "ArenaMisaligned";
    case Error::kDTypeMismatch: return "DTypeMismatch";
    case Error::kShapeMismatch: return "ShapeMismatch";
    case Error::kBufferTooSmall: return "BufferTooSmall";
    case Error::kBufferMisaligned: return "BufferMisaligned";
    case Error::kNotBound: return "NotBound";
    case Error::kDeviceMismatch: return "DeviceMismatch";
    case Error::kBackendNotFound: return "BackendNotFound";
    case Error::kDelegateInitFailed: return "DelegateInitFailed";
    case Error::kDeviceAllocationFailed: return "DeviceAllocationFailed";
    case Error::kDeviceError: return "DeviceError";
    case Error::kInvalidInput: return "InvalidInput";
    case Error::kIoError: return "IoError";
    case Error::kNotSupported: return "NotSupported";
    case Error::kInternal: return "Internal";
    case Error::kCommunicatorMismatch: return "CommunicatorMismatch";
    case Error::kPeerFailed: return "PeerFailed";
  }
  return "Unknown";
}

}  // namespace kiln
