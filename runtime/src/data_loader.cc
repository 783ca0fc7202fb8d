#include "kiln/runtime/data_loader.h"

#include "kiln/runtime/check.h"

namespace kiln {

Result<Span<const uint8_t>> BufferDataLoader::load(uint64_t offset, uint64_t size) {
  KILN_CHECK_OR_RETURN(offset <= size_ && size <= size_ - offset, Error::kInvalidArgument,
                       "load of %llu bytes at offset %llu is outside the %llu-byte buffer",
                       static_cast<unsigned long long>(size), static_cast<unsigned long long>(offset),
                       static_cast<unsigned long long>(size_));
  return Span<const uint8_t>(data_ + offset, static_cast<size_t>(size));
}

}  // namespace kiln
