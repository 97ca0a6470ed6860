// Storage lifetime: owned blocks come from and go back to the caching allocator
// (also in between, for release() / reacquire()).
#include "core/storage.h"

#include "core/allocator.h"
#include "core/error.h"

namespace ember {

Storage::Storage(size_t nbytes) : data_(allocate_bytes(nbytes)), nbytes_(nbytes) {}

Storage::Storage(void* data, size_t nbytes, std::function<void(void*)> release)
    : data_(data), nbytes_(nbytes), release_(std::move(release)) {}

void Storage::release() {
  EMBER_CHECK(!release_, "Storage::release: only owned memory can be released");
  if (data_ == nullptr) return;
  release_bytes(data_, nbytes_);
  data_ = nullptr;
}

void Storage::reacquire() {
  if (data_ == nullptr) data_ = allocate_bytes(nbytes_);
}

Storage::~Storage() {
  if (release_) {
    release_(data_);
  } else {
    release_bytes(data_, nbytes_);
  }
}

}  // namespace ember
