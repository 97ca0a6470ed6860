// Storage: one shared, 64-byte-aligned block of bytes that tensors view.
// It also carries the version counter that autograd uses to notice in-place
// edits of tensors saved for backward (every view of a block shares it).
// An owned block can be released and re-acquired (ZeRO-3 keeps a parameter's
// memory only while it is needed): the Storage object, every view of it and
// its version stay; only the bytes go and come back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace ember {

class Storage {
 public:
  // Owned memory from the caching allocator.
  explicit Storage(size_t nbytes);
  // Borrowed memory (e.g. an mmap'ed file); `release` is called on destruction.
  Storage(void* data, size_t nbytes, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

  // Owned memory only. release() gives the bytes back to the allocator
  // (data() is null until reacquire(), which allocates nbytes() again,
  // contents undefined). Neither changes the version. No-ops when already so.
  void release();
  void reacquire();
  bool resident() const { return data_ != nullptr || nbytes_ == 0; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  uint64_t version_ = 0;
  std::function<void(void*)> release_;  // empty: owned by the allocator
};

}  // namespace ember
