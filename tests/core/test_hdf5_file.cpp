// HDF5 named-tensor files: round trips of every dtype, attributes, strings,
// listing, and clear errors for missing, truncated or non-HDF5 files.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/io/hdf5_file.h"

using namespace ember;
namespace fs = std::filesystem;

static std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("ember_test_" + std::to_string(getpid()) + "_" + name)).string();
}

TEST_CASE("tensors, attributes and strings round-trip", "[hdf5]") {
  const std::string path = temp_path("roundtrip.h5");
  {
    H5File f(path, H5File::Mode::Create);
    f.write_tensor("/model/model.layers.0.mlp.up_proj.weight",
                   Tensor::arange(0, 6, 1, DType::Float32).view({2, 3}));
    f.write_tensor("/a/f64", Tensor::from_vector<double>({1.5, -2.5}));
    f.write_tensor("/a/i32", Tensor::from_vector<int32_t>({7, 8, 9}));
    f.write_tensor("/a/i64", Tensor::from_vector<int64_t>({1ll << 40}));
    f.write_tensor("/a/scalar", Tensor::scalar(3.25, DType::Float64));
    // Non-contiguous input is written in logical order.
    f.write_tensor("/a/transposed", Tensor::arange(0, 6, 1, DType::Float32).view({2, 3}).transpose(0, 1));
    f.write_attr("/", "format", std::string("ember-checkpoint"));
    f.write_attr("/", "version", int64_t{1});
    f.write_attr("/optim", "lr", 0.5);
    f.write_string("/tokenizer/json", std::string(100000, 'x') + "{}");
    f.close();
  }
  H5File f(path, H5File::Mode::Read);
  const Tensor w = f.read_tensor("/model/model.layers.0.mlp.up_proj.weight");
  CHECK(w.shape() == Shape{2, 3});
  CHECK(w.dtype() == DType::Float32);
  CHECK(w.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(f.read_tensor("/a/f64").to_vector<double>() == std::vector<double>{1.5, -2.5});
  CHECK(f.read_tensor("/a/i32").to_vector<int32_t>() == std::vector<int32_t>{7, 8, 9});
  CHECK(f.read_tensor("/a/i64").to_vector<int64_t>() == std::vector<int64_t>{1ll << 40});
  CHECK(f.read_tensor("/a/scalar").item() == 3.25);
  CHECK(f.read_tensor("/a/transposed").to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(f.read_attr_string("/", "format") == "ember-checkpoint");
  CHECK(f.read_attr_int("/", "version") == 1);
  CHECK(f.read_attr_double("/optim", "lr") == 0.5);
  CHECK(f.read_string("/tokenizer/json").size() == 100002);
  CHECK(f.list("/a") == std::vector<std::string>{"f64", "i32", "i64", "scalar", "transposed"});
  CHECK(f.exists("/model"));
  CHECK_FALSE(f.exists("/nothing/here"));
  CHECK(f.has_attr("/", "format"));
  CHECK_FALSE(f.has_attr("/", "missing"));
  CHECK_THROWS_WITH(f.read_tensor("/model/nope"), Catch::Contains(path) && Catch::Contains("/model/nope"));
  CHECK_THROWS_WITH(f.read_attr_int("/", "missing"), Catch::Contains("missing"));
  fs::remove(path);
}

TEST_CASE("missing, truncated and non-HDF5 files are clear errors", "[hdf5]") {
  CHECK_THROWS_WITH(H5File("/nonexistent/dir/x.h5", H5File::Mode::Read), Catch::Contains("/nonexistent/dir/x.h5"));
  CHECK_THROWS_WITH(H5File("/nonexistent/dir/x.h5", H5File::Mode::Create), Catch::Contains("writable"));
  const std::string text = temp_path("not.h5");
  std::ofstream(text) << "hello";
  CHECK_THROWS_WITH(H5File(text, H5File::Mode::Read), Catch::Contains("not HDF5"));
  fs::remove(text);

  const std::string path = temp_path("trunc.h5");
  {
    H5File f(path, H5File::Mode::Create);
    f.write_tensor("/model/w", Tensor::ones({256, 256}));
    f.close();
  }
  fs::resize_file(path, fs::file_size(path) / 2);
  bool failed = false;
  try {
    H5File f(path, H5File::Mode::Read);
    f.read_tensor("/model/w");
  } catch (const Error&) {
    failed = true;
  }
  CHECK(failed);
  fs::remove(path);
}
