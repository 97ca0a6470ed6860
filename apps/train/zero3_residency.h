// apps::Zero3Residency: ZeRO-3's schedule of parameter gathers, wiring a
// Transformer's block hooks (nn::BlockResidency) to dist::ShardedParameters
// (header only: the MPI tests use it too).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "dist/sharded_parameters.h"
#include "nn/block_residency.h"

namespace ember::apps {

// ZeRO-3's schedule of gathers: block i is unit i, the token embedding table unit L + 1 and
// everything else unit L (both gathered when the forward begins, released once the head's
// backward is done; a tied table as soon as the head's backward has read it, so the head's
// gradient of the table takes its memory). Each block's gather waits for the one started while
// the previous block computed and starts the next (in forward order, then in backward order);
// the last block stays for the backward that follows a training forward.
class Zero3Residency : public nn::BlockResidency {
 public:
  Zero3Residency(dist::ShardedParameters& sharded, int64_t blocks)
      : sharded_(sharded), blocks_(blocks) {}
  void forward_begins() override {
    sharded_.gather(blocks_);
    sharded_.gather(blocks_ + 1);
    if (blocks_ > 0) sharded_.prefetch(0);
  }
  void before_forward(size_t i) override {
    sharded_.gather(unit(i));
    if (unit(i) + 1 < blocks_) sharded_.prefetch(unit(i) + 1);
  }
  void after_forward(size_t i) override {
    if (unit(i) + 1 < blocks_ || !grad_enabled()) sharded_.release(unit(i));
  }
  void before_backward(size_t i) override {
    sharded_.gather(unit(i));
    if (i > 0) sharded_.prefetch(unit(i) - 1);
  }
  void after_backward(size_t i) override { sharded_.release(unit(i)); }
  void tied_table_read() override { sharded_.release(blocks_ + 1); }
  void after_head_backward() override {
    sharded_.release(blocks_);
    sharded_.release(blocks_ + 1);
  }

 private:
  static int64_t unit(size_t i) { return static_cast<int64_t>(i); }
  dist::ShardedParameters& sharded_;
  int64_t blocks_;
};

// Per parameter: its block's index for "model.layers.<i>.*", n_layers + 1 for the token table
// "model.embed_tokens.*", n_layers for the rest.
inline std::vector<int64_t> block_units(const std::vector<std::pair<std::string, Variable>>& named,
                                 int64_t n_layers) {
  const std::string prefix = "model.layers.", table = "model.embed_tokens.";
  std::vector<int64_t> units;
  for (const auto& [name, v] : named) {
    int64_t u = n_layers;
    if (name.rfind(prefix, 0) == 0) u = std::stoll(name.substr(prefix.size()));
    if (name.rfind(table, 0) == 0) u = n_layers + 1;
    units.push_back(u);
  }
  return units;
}

}  // namespace ember::apps
