// A whole-file checksum in an HDF5 user block. ember's HDF5 files reserve
// their first 512 bytes (libhdf5 and h5py skip a user block), and once the
// file is complete that block holds one line
//   "ember-ckpt-digest 1 crc32c <N> <8 hex digits>\n", then zeros,
// N being the byte count after the block and the digest their CRC-32C.
// Verifying it before libhdf5 parses a file keeps corrupt files away from it.
#pragma once
#include <cstddef>
#include <string>

namespace ember {

inline constexpr size_t kDigestBlockBytes = 512;

// Writes the digest line of a complete file made with a kDigestBlockBytes
// user block, then fsyncs it. An Error naming the file when that fails.
void seal_file_digest(const std::string& path);

// True when the file carries a digest line and every byte matches it; false
// for a file without one (plain HDF5, e.g. written by h5py or an older ember).
// An Error "<path>: checksum mismatch (file corrupt)" for any difference,
// including a damaged digest line and a truncated or extended file.
bool verify_file_digest(const std::string& path);

}  // namespace ember
