// score_sides (see side_scores.h): sides padded after their ids, one forward per batch.
#include "apps/common/side_scores.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "core/error.h"

namespace ember::apps {
namespace {

// Sides [first, first + count) in one forward; writes out[first ..].
void score_batch(const nn::Transformer& model, const std::vector<std::vector<uint32_t>>& sides,
                 size_t first, size_t count, std::vector<float>& out) {
  const int64_t T = model.config().max_seq_len;
  int64_t width = 1;
  std::vector<int64_t> last(count);
  for (size_t r = 0; r < count; ++r) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(sides[first + r].size()), T);
    last[r] = n - 1;  // the last input position: a side cut to T + 1 ids feeds T of them
    width = std::max(width, n);
  }
  std::vector<int64_t> ids(count * static_cast<size_t>(width), 0);  // padded after the ids
  for (size_t r = 0; r < count; ++r) {
    const std::vector<uint32_t>& s = sides[first + r];
    std::copy(s.begin(), s.begin() + last[r] + 1, ids.begin() + static_cast<int64_t>(r) * width);
  }
  const int64_t B = static_cast<int64_t>(count);
  const Tensor scores =
      model.scores(Tensor::from_vector(ids, {B, width}), Tensor::from_vector(last, {B}))
          .data()
          .to(DType::Float32)
          .contiguous();
  std::copy(scores.data<float>(), scores.data<float>() + count, out.begin() + first);
}

}  // namespace

std::vector<float> score_sides(const nn::Transformer& model,
                               const std::vector<std::vector<uint32_t>>& sides,
                               int64_t batch_size) {
  EMBER_CHECK(batch_size > 0, "--batch-size must be positive, got ", batch_size);
  const size_t T = static_cast<size_t>(model.config().max_seq_len);
  for (const std::vector<uint32_t>& s : sides)
    EMBER_CHECK(!s.empty() && s.size() <= T + 1, "score_sides: a side of ", s.size(),
                " ids (expected 1 to max_seq_len + 1 = ", T + 1, ")");
  std::vector<float> out(sides.size());
  NoGradGuard no_grad;
  for (size_t first = 0; first < sides.size(); first += static_cast<size_t>(batch_size))
    score_batch(model, sides, first,
                std::min(sides.size() - first, static_cast<size_t>(batch_size)), out);
  return out;
}

}  // namespace ember::apps
