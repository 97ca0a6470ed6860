// SHA-256 (core/io/sha256.h) against the FIPS 180-2 / NIST test vectors, fed
// whole, byte by byte and from a file; and a missing file's error.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/io/sha256.h"
#include "temp_dir.h"

using namespace ember;
using ember::testing::TempDir;

static const std::string kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const std::string k448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

TEST_CASE("sha256: NIST vectors", "[sha256]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == kAbc);
  CHECK(sha256_hex(k448) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: incremental updates equal one update", "[sha256]") {
  Sha256 s;
  for (char c : k448) s.update(&c, 1);
  CHECK(s.hex_digest() == sha256_hex(k448));
}

TEST_CASE("sha256_file: streamed file digest, missing file error", "[sha256]") {
  TempDir dir("sha256");
  const std::string path = dir / "a.bin";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f);
    const std::string chunk(1000, 'a');
    for (int i = 0; i < 1000; ++i) std::fwrite(chunk.data(), 1, chunk.size(), f);
    std::fclose(f);
  }
  CHECK(sha256_file(path) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  CHECK_THROWS_WITH(sha256_file(dir / "none"), Catch::Contains(dir / "none"));
}
