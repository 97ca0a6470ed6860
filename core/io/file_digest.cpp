// seal_file_digest / verify_file_digest (see file_digest.h): the bytes after
// the user block are read in 8 MiB pieces and CRC-32C'd (core/io/crc32c.h).
#include "core/io/file_digest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/io/crc32c.h"
#include "core/error.h"

namespace ember {
namespace {

constexpr char kMagic[] = "ember-ckpt-digest";
constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

// Closes a file descriptor on scope exit.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool read_at(int fd, void* buf, size_t n, off_t offset) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got, n -= static_cast<size_t>(got), offset += got;
  }
  return true;
}

// CRC-32C of bytes [kDigestBlockBytes, size) of an open file; false on a read error.
bool digest_after_block(int fd, uint64_t size, uint32_t& crc) {
  std::vector<char> buf(size_t{8} << 20);
  crc = 0;
  for (uint64_t at = kDigestBlockBytes; at < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - at));
    if (!read_at(fd, buf.data(), n, static_cast<off_t>(at))) return false;
    crc = crc32c_extend(crc, buf.data(), n);
    at += n;
  }
  return true;
}

// The whole user block for `bytes` bytes after it with CRC `crc`.
std::vector<char> digest_block(uint64_t bytes, uint32_t crc) {
  std::vector<char> block(kDigestBlockBytes, '\0');
  std::snprintf(block.data(), block.size(), "%s 1 crc32c %" PRIu64 " %08" PRIx32 "\n", kMagic, bytes, crc);
  return block;
}

}  // namespace

void seal_file_digest(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
  struct stat st {};
  EMBER_CHECK(f.fd >= 0 && ::fstat(f.fd, &st) == 0, path, ": cannot reopen to write its checksum: ",
              std::strerror(errno));
  const auto size = static_cast<uint64_t>(st.st_size);
  unsigned char head[8] = {};
  uint32_t crc = 0;
  EMBER_CHECK(size >= kDigestBlockBytes + 8 && read_at(f.fd, head, 8, kDigestBlockBytes) &&
                  std::memcmp(head, kHdf5Signature, 8) == 0,
              path, ": no HDF5 user block for the checksum (internal error)");
  EMBER_CHECK(digest_after_block(f.fd, size, crc), path, ": cannot read back for the checksum: ",
              std::strerror(errno));
  const std::vector<char> block = digest_block(size - kDigestBlockBytes, crc);
  EMBER_CHECK(::pwrite(f.fd, block.data(), block.size(), 0) == static_cast<ssize_t>(block.size()) &&
                  ::fsync(f.fd) == 0,
              path, ": cannot write the checksum: ", std::strerror(errno));
}

bool verify_file_digest(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st {};
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0) return false;  // libhdf5 reports the missing file
  const auto size = static_cast<uint64_t>(st.st_size);
  std::vector<char> block(kDigestBlockBytes, '\0');
  if (size < kDigestBlockBytes || !read_at(f.fd, block.data(), block.size(), 0)) return false;
  if (std::memcmp(block.data(), kMagic, sizeof kMagic - 1) != 0) {
    // Not ember's line. A 512-byte user block before an HDF5 superblock is
    // what ember writes: its line is damaged. Anything else is not ours.
    unsigned char head[8] = {};
    const bool ember_layout = size >= kDigestBlockBytes + 8 && read_at(f.fd, head, 8, kDigestBlockBytes) &&
                              std::memcmp(head, kHdf5Signature, 8) == 0 &&
                              std::memcmp(block.data(), kHdf5Signature, 8) != 0;
    EMBER_CHECK(!ember_layout, path, ": checksum mismatch (file corrupt)");
    return false;
  }
  uint32_t crc = 0;
  EMBER_CHECK(digest_after_block(f.fd, size, crc), path, ": cannot read: ", std::strerror(errno));
  EMBER_CHECK(digest_block(size - kDigestBlockBytes, crc) == block, path, ": checksum mismatch (file corrupt)");
  return true;
}

}  // namespace ember
