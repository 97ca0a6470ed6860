// HDF5 read/write through the C API (libhdf5, serial). Errors are turned
// into ember::Error; HDF5's own error stack printing is silenced. Files are
// made with a user block for the whole-file checksum (core/io/file_digest.h),
// verified before libhdf5 reads a byte of the file.
#include "core/io/hdf5_file.h"

#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/io/file_digest.h"
#include "core/system_memory.h"

namespace ember {
namespace {

hid_t h5_type(DType dt) {
  switch (dt) {
    case DType::Float32: return H5T_NATIVE_FLOAT;
    case DType::Float64: return H5T_NATIVE_DOUBLE;
    case DType::Int32: return H5T_NATIVE_INT32;
    case DType::Int64: return H5T_NATIVE_INT64;
    case DType::BFloat16: break;  // matmul operands only, never stored
  }
  throw Error(detail::concat("HDF5: no file type for ", dtype_name(dt), " tensors"));
}

// Closes an HDF5 handle on scope exit.
struct Handle {
  hid_t id;
  herr_t (*closer)(hid_t);
  ~Handle() {
    if (id >= 0) closer(id);
  }
};

// Before the first HDF5 call: no error stack printing, and no atexit handler.
// libhdf5 1.10 keeps a file's id after an H5Fclose that failed to write (a
// full disk) while freeing the file, and its atexit handler then crashes on
// it; every file here is closed by its H5File, so the handler has nothing to do.
void init_hdf5() {
  static bool done = [] {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// The reason of a failed write when the system gave one the user can act on
// (libhdf5 keeps errno from its failed write()): ": No space left on device".
std::string write_failure_reason() {
  const int err = errno;
  return err == ENOSPC || err == EFBIG || err == EDQUOT || err == EIO || err == EROFS
             ? std::string(": ") + std::strerror(err)
             : std::string();
}

// A dataset's declared shape, read before its data: a corrupt or hostile file may
// declare one whose byte count overflows or exceeds this machine's memory.
void check_declared_size(const std::vector<hsize_t>& dims, size_t element_bytes, const std::string& file,
                         const std::string& dataset) {
  const auto shape_text = [&] {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  };
  uint64_t bytes = element_bytes;
  for (const hsize_t d : dims) {
    EMBER_CHECK(d == 0 || bytes <= static_cast<uint64_t>(INT64_MAX) / d, file, ": dataset ", dataset,
                " declares shape ", shape_text(), ", whose size overflows 64-bit integers (file corrupt?)");
    bytes *= d;
  }
  const SystemMemory mem = system_memory();
  EMBER_CHECK(mem.bytes == 0 || bytes <= static_cast<uint64_t>(mem.bytes), file, ": dataset ", dataset,
              " declares shape ", shape_text(), " (", bytes_str(static_cast<long double>(bytes)),
              "), more than this machine's ", bytes_str(static_cast<long double>(mem.bytes)), " of ", mem.what,
              " (file corrupt?)");
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

}  // namespace

H5File::H5File(const std::string& path, Mode mode) : path_(path) {
  init_hdf5();
  if (mode == Mode::Read) {
    verify_file_digest(path);  // a corrupt file never reaches libhdf5
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    EMBER_CHECK(file_ >= 0, path, ": cannot open as an HDF5 file (missing, truncated or not HDF5)");
  } else {
    Handle fcpl{H5Pcreate(H5P_FILE_CREATE), H5Pclose};
    H5Pset_userblock(fcpl.id, kDigestBlockBytes);
    errno = 0;
    file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.id, H5P_DEFAULT);
    const std::string reason = write_failure_reason();  // a full disk, not a permission
    EMBER_CHECK(file_ >= 0, path, ": cannot create the HDF5 file",
                reason.empty() ? " (is the folder writable?)" : reason);
    seal_on_close_ = true;
  }
}

H5File::~H5File() {
  if (file_ >= 0) H5Fclose(file_);
}

void H5File::close() {
  if (file_ < 0) return;
  errno = 0;
  const herr_t flushed = H5Fflush(file_, H5F_SCOPE_GLOBAL);
  const std::string reason = write_failure_reason();
  const herr_t closed = H5Fclose(file_);
  file_ = -1;
  EMBER_CHECK(flushed >= 0 && closed >= 0, path_, ": writing the HDF5 file failed",
              reason.empty() ? " (disk full?)" : reason);
  if (seal_on_close_) seal_file_digest(path_);
}

bool H5File::exists(const std::string& object_path) const {
  // Check each prefix: H5Lexists fails if an intermediate group is missing.
  size_t pos = 1;
  while (pos <= object_path.size()) {
    size_t next = object_path.find('/', pos);
    if (next == std::string::npos) next = object_path.size();
    const std::string prefix = object_path.substr(0, next);
    if (prefix.size() > 1 && H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    pos = next + 1;
  }
  return true;
}

int64_t H5File::open_or_create_group(const std::string& group_path) {
  if (group_path == "/") return H5Gopen2(file_, "/", H5P_DEFAULT);
  if (exists(group_path)) return H5Gopen2(file_, group_path.c_str(), H5P_DEFAULT);
  Handle lcpl{H5Pcreate(H5P_LINK_CREATE), H5Pclose};
  H5Pset_create_intermediate_group(lcpl.id, 1);
  const hid_t g = H5Gcreate2(file_, group_path.c_str(), lcpl.id, H5P_DEFAULT, H5P_DEFAULT);
  EMBER_CHECK(g >= 0, path_, ": cannot create group ", group_path);
  return g;
}

void H5File::write_tensor(const std::string& dataset_path, const Tensor& t) {
  Handle group{open_or_create_group(parent_of(dataset_path)), H5Gclose};
  const Tensor c = t.contiguous();
  std::vector<hsize_t> dims(c.shape().begin(), c.shape().end());
  Handle space{dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose};
  const std::string name = dataset_path.substr(dataset_path.find_last_of('/') + 1);
  Handle ds{H5Dcreate2(group.id, name.c_str(), h5_type(c.dtype()), space.id, H5P_DEFAULT,
                       H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose};
  EMBER_CHECK(ds.id >= 0, path_, ": cannot create dataset ", dataset_path, " (does it exist already?)");
  errno = 0;
  EMBER_CHECK(c.numel() == 0 || H5Dwrite(ds.id, h5_type(c.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                         c.raw_data()) >= 0,
              path_, ": cannot write dataset ", dataset_path, write_failure_reason());
}

Tensor H5File::read_tensor(const std::string& dataset_path) const {
  EMBER_CHECK(exists(dataset_path), path_, ": no dataset ", dataset_path);
  Handle ds{H5Dopen2(file_, dataset_path.c_str(), H5P_DEFAULT), H5Dclose};
  EMBER_CHECK(ds.id >= 0, path_, ": ", dataset_path, " is not a dataset");
  Handle type{H5Dget_type(ds.id), H5Tclose};
  const H5T_class_t cls = H5Tget_class(type.id);
  const size_t size = H5Tget_size(type.id);
  DType dtype;
  if (cls == H5T_FLOAT && size == 4) {
    dtype = DType::Float32;
  } else if (cls == H5T_FLOAT && size == 8) {
    dtype = DType::Float64;
  } else if (cls == H5T_INTEGER && size == 4) {
    dtype = DType::Int32;
  } else if (cls == H5T_INTEGER && size == 8) {
    dtype = DType::Int64;
  } else {
    throw Error(path_ + ": dataset " + dataset_path +
                " has an unsupported type (need float32, float64, int32 or int64)");
  }
  Handle space{H5Dget_space(ds.id), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space.id);
  EMBER_CHECK(rank >= 0, path_, ": cannot read the shape of ", dataset_path);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  Shape shape(dims.begin(), dims.end());
  check_declared_size(dims, dtype_size(dtype), path_, dataset_path);  // before allocating it
  Tensor t = Tensor::empty(shape, dtype);
  EMBER_CHECK(t.numel() == 0 || H5Dread(ds.id, h5_type(dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                        t.raw_data()) >= 0,
              path_, ": cannot read dataset ", dataset_path, " (file truncated or corrupt?)");
  return t;
}

void H5File::write_string(const std::string& dataset_path, const std::string& value) {
  Handle group{open_or_create_group(parent_of(dataset_path)), H5Gclose};
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, std::max<size_t>(value.size(), 1));
  H5Tset_cset(type.id, H5T_CSET_UTF8);
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  const std::string name = dataset_path.substr(dataset_path.find_last_of('/') + 1);
  Handle ds{H5Dcreate2(group.id, name.c_str(), type.id, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose};
  EMBER_CHECK(ds.id >= 0, path_, ": cannot create dataset ", dataset_path);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  errno = 0;
  EMBER_CHECK(H5Dwrite(ds.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, padded.data()) >= 0, path_,
              ": cannot write dataset ", dataset_path, write_failure_reason());
}

std::string H5File::read_string(const std::string& dataset_path) const {
  EMBER_CHECK(exists(dataset_path), path_, ": no dataset ", dataset_path);
  Handle ds{H5Dopen2(file_, dataset_path.c_str(), H5P_DEFAULT), H5Dclose};
  Handle type{H5Dget_type(ds.id), H5Tclose};
  EMBER_CHECK(H5Tget_class(type.id) == H5T_STRING, path_, ": dataset ", dataset_path, " is not a string");
  if (H5Tis_variable_str(type.id) > 0) {
    Handle mem{H5Tcopy(H5T_C_S1), H5Tclose};
    H5Tset_size(mem.id, H5T_VARIABLE);
    char* buf = nullptr;
    EMBER_CHECK(H5Dread(ds.id, mem.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, &buf) >= 0, path_,
                ": cannot read dataset ", dataset_path);
    std::string out = buf ? buf : "";
    Handle space{H5Dget_space(ds.id), H5Sclose};
    H5Dvlen_reclaim(mem.id, space.id, H5P_DEFAULT, &buf);
    return out;
  }
  std::string out(H5Tget_size(type.id), '\0');
  EMBER_CHECK(H5Dread(ds.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0, path_,
              ": cannot read dataset ", dataset_path, " (file truncated or corrupt?)");
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

std::vector<std::string> H5File::list(const std::string& group_path) const {
  std::vector<std::string> names;
  if (!exists(group_path)) return names;
  Handle g{H5Gopen2(file_, group_path.c_str(), H5P_DEFAULT), H5Gclose};
  EMBER_CHECK(g.id >= 0, path_, ": ", group_path, " is not a group");
  H5G_info_t info;
  H5Gget_info(g.id, &info);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(g.id, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    std::string name(static_cast<size_t>(len), '\0');
    H5Lget_name_by_idx(g.id, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size() + 1, H5P_DEFAULT);
    H5O_info_t oinfo;
    if (H5Oget_info_by_name(g.id, name.c_str(), &oinfo, H5P_DEFAULT) >= 0 && oinfo.type == H5O_TYPE_DATASET) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

void write_attr_raw(hid_t obj, const std::string& name, hid_t type, const void* data) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attr{H5Acreate2(obj, name.c_str(), type, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  EMBER_CHECK(attr.id >= 0 && H5Awrite(attr.id, type, data) >= 0, "cannot write attribute ", name);
}

}  // namespace

void H5File::write_attr(const std::string& group_path, const std::string& name, const std::string& value) {
  Handle g{open_or_create_group(group_path), H5Gclose};
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, std::max<size_t>(value.size(), 1));
  H5Tset_cset(type.id, H5T_CSET_UTF8);
  write_attr_raw(g.id, name, type.id, value.empty() ? "" : value.data());
}

void H5File::write_attr(const std::string& group_path, const std::string& name, int64_t value) {
  Handle g{open_or_create_group(group_path), H5Gclose};
  write_attr_raw(g.id, name, H5T_NATIVE_INT64, &value);
}

void H5File::write_attr(const std::string& group_path, const std::string& name, double value) {
  Handle g{open_or_create_group(group_path), H5Gclose};
  write_attr_raw(g.id, name, H5T_NATIVE_DOUBLE, &value);
}

bool H5File::has_attr(const std::string& group_path, const std::string& name) const {
  if (!exists(group_path)) return false;
  return H5Aexists_by_name(file_, group_path.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

namespace {

hid_t open_attr(hid_t file, const std::string& path, const std::string& group, const std::string& name) {
  EMBER_CHECK(H5Aexists_by_name(file, group.c_str(), name.c_str(), H5P_DEFAULT) > 0, path,
              ": missing attribute \"", name, "\" on ", group);
  return H5Aopen_by_name(file, group.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
}

}  // namespace

std::string H5File::read_attr_string(const std::string& group_path, const std::string& name) const {
  EMBER_CHECK(exists(group_path), path_, ": no group ", group_path);
  Handle attr{open_attr(file_, path_, group_path, name), H5Aclose};
  Handle type{H5Aget_type(attr.id), H5Tclose};
  EMBER_CHECK(H5Tget_class(type.id) == H5T_STRING, path_, ": attribute \"", name, "\" on ",
              group_path, " is not a string");
  if (H5Tis_variable_str(type.id) > 0) {  // as h5py writes by default
    Handle mem{H5Tcopy(H5T_C_S1), H5Tclose};
    H5Tset_size(mem.id, H5T_VARIABLE);
    H5Tset_cset(mem.id, H5Tget_cset(type.id));
    char* buf = nullptr;
    EMBER_CHECK(H5Aread(attr.id, mem.id, &buf) >= 0, path_, ": cannot read attribute ", name);
    std::string out = buf ? buf : "";
    Handle space{H5Aget_space(attr.id), H5Sclose};
    H5Dvlen_reclaim(mem.id, space.id, H5P_DEFAULT, &buf);
    return out;
  }
  const size_t size = H5Tget_size(type.id);
  std::string out(size, '\0');
  EMBER_CHECK(H5Aread(attr.id, type.id, out.data()) >= 0, path_, ": cannot read attribute ", name);
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

int64_t H5File::read_attr_int(const std::string& group_path, const std::string& name) const {
  EMBER_CHECK(exists(group_path), path_, ": no group ", group_path);
  Handle attr{open_attr(file_, path_, group_path, name), H5Aclose};
  int64_t v = 0;
  EMBER_CHECK(H5Aread(attr.id, H5T_NATIVE_INT64, &v) >= 0, path_, ": attribute \"", name,
              "\" on ", group_path, " is not an integer");
  return v;
}

double H5File::read_attr_double(const std::string& group_path, const std::string& name) const {
  EMBER_CHECK(exists(group_path), path_, ": no group ", group_path);
  Handle attr{open_attr(file_, path_, group_path, name), H5Aclose};
  double v = 0;
  EMBER_CHECK(H5Aread(attr.id, H5T_NATIVE_DOUBLE, &v) >= 0, path_, ": attribute \"", name,
              "\" on ", group_path, " is not a number");
  return v;
}

}  // namespace ember
