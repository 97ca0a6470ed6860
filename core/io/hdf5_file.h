// HDF5 named-tensor files: the one place that includes hdf5.h. Datasets are
// addressed by path ("/model/model.norm.weight"); groups on the way are made
// as needed. Attributes (strings, integers, doubles) hang on groups.
// Every failure is an ember::Error naming the file and the object. Files
// written here carry a whole-file checksum, sealed by close() and verified
// on opening (core/io/file_digest.h); files without one are read unverified.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember {

class H5File {
 public:
  enum class Mode { Read, Create };  // Create truncates
  H5File(const std::string& path, Mode mode);
  ~H5File();
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;

  const std::string& path() const { return path_; }
  bool exists(const std::string& object_path) const;

  // Tensors of any dtype; read returns a contiguous tensor of the stored dtype.
  void write_tensor(const std::string& dataset_path, const Tensor& t);
  Tensor read_tensor(const std::string& dataset_path) const;
  // A string stored as a scalar dataset (for text too large for an attribute).
  void write_string(const std::string& dataset_path, const std::string& value);
  std::string read_string(const std::string& dataset_path) const;
  // Names of the datasets directly inside a group (sorted).
  std::vector<std::string> list(const std::string& group_path) const;

  // Attributes on a group ("/" is the root); the group is created on write.
  void write_attr(const std::string& group_path, const std::string& name, const std::string& value);
  void write_attr(const std::string& group_path, const std::string& name, int64_t value);
  void write_attr(const std::string& group_path, const std::string& name, double value);
  bool has_attr(const std::string& group_path, const std::string& name) const;
  std::string read_attr_string(const std::string& group_path, const std::string& name) const;
  int64_t read_attr_int(const std::string& group_path, const std::string& name) const;
  double read_attr_double(const std::string& group_path, const std::string& name) const;

  // Flushes to disk, closes and seals the checksum. Without it (the
  // destructor) a written file stays unsealed and later reads refuse it.
  void close();

 private:
  int64_t open_or_create_group(const std::string& group_path);
  std::string path_;
  int64_t file_ = -1;  // hid_t
  bool seal_on_close_ = false;
};

}  // namespace ember
