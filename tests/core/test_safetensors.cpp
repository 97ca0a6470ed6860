// safetensors reader/writer: the byte layout, exact F16/BF16 conversion, and
// every kind of corrupt file giving an ember::Error that names the file.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/io/safetensors.h"
#include "core/error.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("ember_st_" + std::to_string(getpid()) + "_" + name);
}

// A file made of the given u64 header length, header text and data bytes.
std::string write_raw(const std::string& name, uint64_t n, const std::string& header,
                      const std::string& data) {
  const std::string path = temp_file(name).string();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
  return path;
}
std::string write_raw(const std::string& name, const std::string& header, const std::string& data) {
  return write_raw(name, header.size(), header, data);
}

std::string bytes_of(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile f(path);
    for (const auto& [name, e] : f.entries()) f.read(name);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors: the writer's layout, read back bit for bit") {
  const std::string path = temp_file("rt.safetensors").string();
  std::map<std::string, Tensor> t;
  t["b"] = Tensor::randn({3, 5}, 1);
  t["a.weight"] = Tensor::randn({7}, 2);
  t["empty"] = Tensor::zeros({0, 4});
  write_safetensors(path, t);

  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  CHECK(n % 8 == 0);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  const auto h = nlohmann::json::parse(header);
  CHECK(h["__metadata__"]["format"] == "pt");
  CHECK(h["b"]["dtype"] == "F32");
  CHECK(h["b"]["shape"] == nlohmann::json({3, 5}));
  CHECK(fs::file_size(path) == 8 + n + 4 * (15 + 7));

  const SafetensorsFile f(path);
  REQUIRE(f.entries().size() == 3);
  CHECK(f.metadata().at("format") == "pt");
  for (const auto& [name, want] : t) {
    const Tensor got = f.read(name);
    REQUIRE(got.shape() == want.shape());
    CHECK(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()) == 0);
  }
  fs::remove(path);
}

TEST_CASE("safetensors: F16, BF16 and F64 become the exact float32 values") {
  // F16: 1, -2, 65504 (largest), 2^-24 (smallest subnormal), 0x3555, -0, inf
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x3555, 0x8000, 0x7C00};
  // BF16: 1, -5, 0x3EAA (0.33203125), 2^-133 (subnormal)
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC0A0, 0x3EAA, 0x0001};
  const double f64[2] = {0.1, -3.5};
  const std::string data =
      bytes_of(f16) + bytes_of(bf16) + std::string(reinterpret_cast<const char*>(f64), 16);
  const std::string header = R"({"h":{"dtype":"F16","shape":[7],"data_offsets":[0,14]},)"
                             R"("b":{"dtype":"BF16","shape":[2,2],"data_offsets":[14,22]},)"
                             R"("d":{"dtype":"F64","shape":[2],"data_offsets":[22,38]}})";
  const std::string path = write_raw("dtypes.safetensors", header, data);
  const SafetensorsFile f(path);
  const std::vector<float> h = f.read("h").to_vector<float>();
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 65504.0f);
  CHECK(h[3] == std::ldexp(1.0f, -24));
  CHECK(h[4] == 0.333251953125f);  // 0x3555 = (1 + 341/1024) * 2^-2
  CHECK((h[5] == 0.0f && std::signbit(h[5])));
  CHECK(std::isinf(h[6]));
  const Tensor b = f.read("b");
  CHECK(b.shape() == Shape({2, 2}));
  const std::vector<float> bv = b.to_vector<float>();
  CHECK(bv[0] == 1.0f);
  CHECK(bv[1] == -5.0f);
  CHECK(bv[2] == 0.33203125f);
  CHECK(bv[3] == std::ldexp(1.0f, -133));
  CHECK(f.read("d").to_vector<float>() == std::vector<float>{0.1f, -3.5f});
  fs::remove(path);
}

TEST_CASE("safetensors: corrupt files are one Error naming the file") {
  const std::string ok_entry = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  struct Case {
    const char* name;
    std::string header, data, expect;
    uint64_t n = UINT64_MAX;  // UINT64_MAX: the header's real size
  };
  const std::vector<Case> cases = {
      {"length beyond file", "{" + ok_entry + "}", eight, "header length", 1u << 30},
      {"length huge", "{" + ok_entry + "}", eight, "header length", UINT64_MAX - 3},
      {"not json", "{\"x\": [1, 2", eight, "not valid JSON"},
      {"not an object", "[1, 2]", eight, "JSON object"},
      {"unknown dtype", R"({"x":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", eight,
       "unknown dtype"},
      {"missing field", R"({"x":{"dtype":"F32","shape":[2]}})", eight, "data_offsets"},
      {"negative dim", R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight,
       "non-negative"},
      {"size mismatch", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight,
       "needs 12"},
      {"outside file", R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight,
       "outside"},
      {"reversed", R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight, "outside"},
      {"overlap",
       R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       eight, "overlap"},
      {"hole", R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight, "hole"},
      {"trailing bytes", R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight,
       "after the last"},
      {"bad metadata", R"({"__metadata__":{"a":1},)" + ok_entry + "}", eight, "__metadata__"},
      {"integer dtype read", R"({"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", eight,
       "I64"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const uint64_t n = c.n == UINT64_MAX ? c.header.size() : c.n;
    const std::string path = write_raw("corrupt.safetensors", n, c.header, c.data);
    const std::string err = error_of(path);
    CHECK(err.find(path) != std::string::npos);
    CHECK(err.find(c.expect) != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
    fs::remove(path);
  }
  const std::string tiny = temp_file("tiny.safetensors").string();
  std::ofstream(tiny) << "abc";
  CHECK(error_of(tiny).find("shorter than") != std::string::npos);
  fs::remove(tiny);
  CHECK(error_of(temp_file("absent.safetensors").string()).find("no such") != std::string::npos);
}
