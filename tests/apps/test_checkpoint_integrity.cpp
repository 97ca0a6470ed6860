// Checkpoints and run files under corruption and disk faults: CRC-32C test
// vectors, a flipped byte anywhere in a checkpoint is a clean error (never a
// crash in libhdf5), plain HDF5 files without the checksum still read, resume
// falls back past a corrupt checkpoint, pruning spares `latest`, stale
// temporaries are removed, and metrics.jsonl never keeps a partial line.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>

#include "nn/checkpoint_file.h"
#include "apps/train/metrics_log.h"
#include "apps/train/run_files.h"
#include "core/io/crc32c.h"
#include "core/io/file_digest.h"
#include "core/io/hdf5_file.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::apps;
namespace fs = std::filesystem;
using testing::read_text;
using testing::TempDir;

namespace {

nn::Checkpoint small_checkpoint(int64_t step) {
  nn::Checkpoint c;
  c.config = nn::ModelConfig::from_json(
      R"({"vocab_size": 64, "d_model": 16, "n_layers": 1, "n_heads": 2, "ffn_hidden": 32, "max_seq_len": 32})",
      "test config");
  c.model["w"] = Tensor::rand({64, 16}, 1, 0, DType::Float32, -1, 1);
  c.model["b"] = Tensor::rand({16}, 2, 0, DType::Float32, -1, 1);
  for (const char* m : {"exp_avg", "exp_avg_sq"}) {
    c.optim[std::string("w/") + m] = Tensor::ones({64, 16});
    c.optim[std::string("b/") + m] = Tensor::ones({16});
  }
  c.optim_step = step;
  c.train_step = step;
  c.train_state = R"({"step": )" + std::to_string(step) + "}";
  c.tokenizer_json = R"({"model": {"type": "BPE"}})";
  return c;
}

void flip_byte(const std::string& path, size_t offset, unsigned char mask) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  const char c = static_cast<char>(f.get() ^ mask);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(c);
}

}  // namespace

TEST_CASE("CRC-32C matches the RFC 3720 test vectors in one call and in pieces", "[checkpoint][crc]") {
  CHECK(crc32c_extend(0, "123456789", 9) == 0xE3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  CHECK(crc32c_extend(0, zeros.data(), 32) == 0x8A9136AAu);
  CHECK(crc32c_extend(0, ones.data(), 32) == 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  CHECK(crc32c_extend(0, ascending.data(), 32) == 0x46DD794Eu);
  CHECK(crc32c_extend(crc32c_extend(0, ascending.data(), 13), ascending.data() + 13, 19) == 0x46DD794Eu);
  // Long runs (three interleaved blocks joined by a shift table) against 7-byte pieces.
  std::string big(100003, '\0');
  std::mt19937 rng(3);
  for (char& ch : big) ch = static_cast<char>(rng());
  for (const size_t n : {size_t{12287}, size_t{12288}, size_t{12289}, size_t{30000}, big.size()}) {
    uint32_t pieces = 0;
    for (size_t at = 0; at < n; at += 7) pieces = crc32c_extend(pieces, big.data() + at, std::min<size_t>(7, n - at));
    CHECK(crc32c_extend(0, big.data(), n) == pieces);
  }
}

TEST_CASE("a checkpoint with any one byte flipped is refused before libhdf5 reads it", "[checkpoint]") {
  TempDir dir("ckpt_flip");
  const std::string good = dir / "good.h5", bad = dir / "bad.h5";
  nn::write_checkpoint(good, small_checkpoint(3));
  REQUIRE(nn::read_checkpoint(good).model.at("w").to_vector<float>() ==
          small_checkpoint(3).model.at("w").to_vector<float>());
  const size_t size = fs::file_size(good);
  // Every byte of the user block, the superblock and the first metadata, then random offsets.
  std::vector<size_t> offsets;
  for (size_t i = 0; i < std::min<size_t>(size, 2048); i += 3) offsets.push_back(i);
  std::mt19937_64 rng(14);
  for (int i = 0; i < 300; ++i) offsets.push_back(rng() % size);
  offsets.push_back(size - 1);
  int refused = 0;
  for (const size_t at : offsets) {
    fs::copy_file(good, bad, fs::copy_options::overwrite_existing);
    flip_byte(bad, at, static_cast<unsigned char>(1u << (at % 8)));
    try {
      nn::read_checkpoint(bad, /*with_optim=*/true);
      FAIL_CHECK("a checkpoint with byte " << at << " flipped was read");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains(bad) && Catch::Contains("checksum mismatch (file corrupt)"));
      ++refused;
    }
  }
  CHECK(refused == static_cast<int>(offsets.size()));
  // Truncated, extended, and written without close() (no checksum sealed).
  fs::copy_file(good, bad, fs::copy_options::overwrite_existing);
  fs::resize_file(bad, size - 1);
  CHECK_THROWS_WITH(nn::read_checkpoint(bad), Catch::Contains("checksum mismatch"));
  fs::resize_file(bad, size + 1);
  CHECK_THROWS_WITH(nn::read_checkpoint(bad), Catch::Contains("checksum mismatch"));
  {
    H5File f(bad, H5File::Mode::Create);
    f.write_tensor("/model/w", Tensor::ones({4}));
  }
  CHECK_THROWS_WITH(H5File(bad, H5File::Mode::Read), Catch::Contains("checksum mismatch"));
}

TEST_CASE("plain HDF5 files without ember's checksum (h5py, older ember) are still read", "[checkpoint]") {
  TempDir dir("ckpt_plain");
  const std::string sealed = dir / "sealed.h5", plain = dir / "plain.h5";
  nn::write_checkpoint(sealed, small_checkpoint(5));
  CHECK(verify_file_digest(sealed));
  // The same file without its user block: libhdf5 finds the superblock at 0.
  const std::string bytes = read_text(sealed);
  std::ofstream(plain, std::ios::binary) << bytes.substr(kDigestBlockBytes);
  CHECK_FALSE(verify_file_digest(plain));
  const nn::Checkpoint c = nn::read_checkpoint(plain);
  CHECK(c.model.at("b").to_vector<float>() == small_checkpoint(5).model.at("b").to_vector<float>());
  CHECK(c.train_step == 5);
}

TEST_CASE("resume falls back to the older checkpoint when the newest is corrupt", "[checkpoint][resume]") {
  TempDir dir("ckpt_resume");
  const std::string run = dir.path.string();
  nn::write_checkpoint(dir / checkpoint_name(1), small_checkpoint(1));
  nn::write_checkpoint(dir / checkpoint_name(2), small_checkpoint(2));
  write_latest(run, checkpoint_name(2));
  CHECK(find_resume_point(run).path == dir / checkpoint_name(2));
  // A flipped bit in tensor data (libhdf5 alone would read it silently) and in the superblock.
  for (const size_t at : {fs::file_size(dir / checkpoint_name(2)) - 100, kDigestBlockBytes + 20}) {
    nn::write_checkpoint(dir / checkpoint_name(2), small_checkpoint(2));
    flip_byte(dir / checkpoint_name(2), at, 0x10);
    CHECK(find_resume_point(run).path == dir / checkpoint_name(1));
  }
  // `latest` naming something that is no checkpoint name is ignored.
  std::ofstream(dir / "latest") << "../../elsewhere.h5\n";
  CHECK(find_resume_point(run).path == dir / checkpoint_name(1));
  fs::remove(dir / checkpoint_name(1));
  CHECK_THROWS_WITH(find_resume_point(run).path, Catch::Contains("no usable checkpoint"));
}

TEST_CASE("pruning never deletes the checkpoint latest names", "[checkpoint][resume]") {
  TempDir dir("ckpt_prune");
  // A resumed run wrote step 6 after falling back past a corrupt step 10.
  for (const int64_t step : {5, 6, 10}) std::ofstream(dir / checkpoint_name(step)) << "x";
  write_latest(dir.path.string(), checkpoint_name(6));
  prune_checkpoints(dir.path.string(), 1, 0);
  CHECK(fs::exists(dir / checkpoint_name(6)));
  CHECK(fs::exists(dir / checkpoint_name(10)));
  CHECK_FALSE(fs::exists(dir / checkpoint_name(5)));
}

TEST_CASE("stale temporaries of ember's writers are removed, nothing else", "[checkpoint][run_files]") {
  TempDir dir("ckpt_stale");
  fs::create_directories(dir.path / "data");
  const std::vector<std::string> stale = {".step_00000010.h5.tmp", ".latest.tmp", "latest.tmp4242",
                                          ".ember_write_test", ".loss.svg.tmp", "data/train_000000.bin.tmp",
                                          "data/val_000003.bin.tmp"};
  const std::vector<std::string> kept = {"step_00000010.h5", "latest", "metrics.jsonl", "notes.tmp",
                                         ".step_1.h5.tmp", "data/train_000000.bin", "mine.bin.tmp"};
  for (const auto& n : stale) dir.write(n, "x");
  for (const auto& n : kept) dir.write(n, "x");
  CHECK(remove_stale_temporaries(dir.path.string()) == static_cast<int>(stale.size()));
  for (const auto& n : stale) CHECK_FALSE(fs::exists(dir / n));
  for (const auto& n : kept) CHECK(fs::exists(dir / n));
  CHECK(remove_stale_temporaries((dir.path / "missing").string()) == 0);
}

TEST_CASE("metrics.jsonl drops a partial last line on open and keeps whole lines on a full disk",
          "[checkpoint][metrics]") {
  TempDir dir("ckpt_metrics");
  const std::string path = dir / "metrics.jsonl";
  dir.write("metrics.jsonl", "{\"step\": 1}\n{\"step\": 2, \"lo");
  {
    MetricsLog log(path);
    log.append(R"({"step": 2})");
  }
  CHECK(read_text(path) == "{\"step\": 1}\n{\"step\": 2}\n");
  // A file-size limit in a child: appends fail with EFBIG once the file would pass 4000 bytes.
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4000, 4000};
    setrlimit(RLIMIT_FSIZE, &limit);
    try {
      MetricsLog log(path);
      for (int i = 0; i < 1000; ++i) log.append(R"({"step": )" + std::to_string(i) + R"(, "loss": 1.2345678})");
      _exit(2);  // never failed
    } catch (const Error& e) {
      _exit(std::string(e.what()).find(path + ": cannot append a line: File too large") == 0 ? 0 : 3);
    }
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string text = read_text(path);
  CHECK(text.size() <= 4000);
  CHECK(text.size() > 3800);
  CHECK(text.back() == '\n');
}

TEST_CASE("moments written from a stream and read back one at a time", "[checkpoint][resume]") {
  TempDir dir("ckpt_stream");
  const nn::Checkpoint whole = small_checkpoint(4);
  nn::Checkpoint c = whole;
  // b's moments come from the stream (as a ZeRO run's, gathered while written), w's from the map.
  c.optim.erase("b/exp_avg");
  c.optim.erase("b/exp_avg_sq");
  int streamed = 0;
  c.optim_stream = [&](const nn::TensorPut& put) {
    for (const char* m : {"b/exp_avg", "b/exp_avg_sq"}) {
      put(m, whole.optim.at(m));
      ++streamed;
    }
  };
  const std::string path = dir / "step.h5";
  nn::write_checkpoint(path, c);
  CHECK(streamed == 2);
  const nn::Checkpoint all = nn::read_checkpoint(path);
  REQUIRE(all.optim.size() == 4);
  for (const auto& [key, t] : whole.optim) CHECK(all.optim.at(key).to_vector<float>() == t.to_vector<float>());
  // Without the tensors: the counts are read and the moments left in the file.
  const nn::Checkpoint meta = nn::read_checkpoint(path, /*with_optim=*/true, /*optim_tensors=*/false);
  CHECK(meta.optim.empty());
  CHECK(meta.optim_step == 4);
  const nn::CheckpointOptimReader reader(path);
  for (const auto& [key, t] : whole.optim) CHECK(reader(key).to_vector<float>() == t.to_vector<float>());
  CHECK(!reader("w/momentum_buffer").defined());
}
