// Storage lifetime: owned blocks come from and go back to the caching allocator.
#include "core/storage.h"

#include "core/allocator.h"

namespace ember {

Storage::Storage(size_t nbytes) : data_(allocate_bytes(nbytes)), nbytes_(nbytes) {}

Storage::Storage(void* data, size_t nbytes, std::function<void(void*)> release)
    : data_(data), nbytes_(nbytes), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    release_(data_);
  } else {
    release_bytes(data_, nbytes_);
  }
}

}  // namespace ember
