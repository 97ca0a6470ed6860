// Chat rows: render and cut each line to T+1 ids (lines in parallel), then
// batches of padded rows with the trained mask over the targets.
#include "data/chat_loader.h"

#include <algorithm>

#include "core/error.h"

namespace ember::data {

ChatRows make_chat_rows(const Tokenizer& tokenizer, const std::vector<ChatLine>& lines,
                        int64_t seq_len) {
  EMBER_CHECK(!lines.empty(), "chat data: no conversation");
  EMBER_CHECK(seq_len >= 1, "chat data: seq_len must be at least 1, got ", seq_len);
  if (std::any_of(lines.begin(), lines.end(), [](const ChatLine& l) { return !l.is_text; }))
    chat_specials(tokenizer);  // the one Error a render could raise, outside the parallel loop
  ChatRows out;
  out.seq_len = seq_len;
  out.rows.resize(lines.size());
  const size_t keep = static_cast<size_t>(seq_len + 1);
  int64_t truncated = 0;
  const int64_t n = static_cast<int64_t>(lines.size());
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : truncated)
  for (int64_t i = 0; i < n; ++i) {
    ChatTokens row = render_chat(tokenizer, lines[static_cast<size_t>(i)]);
    if (row.ids.size() > keep) {
      row.ids.resize(keep);
      row.trained.resize(keep);
      ++truncated;
    }
    out.rows[static_cast<size_t>(i)] = std::move(row);
  }
  out.truncated = truncated;
  return out;
}

ChatLoader::ChatLoader(std::shared_ptr<const ChatRows> rows, BatchLoaderOptions options)
    : rows_(std::move(rows)),
      opt_(options),
      shuffle_(static_cast<int64_t>(rows_->rows.size()), opt_.seed) {
  EMBER_CHECK(opt_.batch > 0 && opt_.grad_accum > 0 && opt_.world > 0 && opt_.rank >= 0 &&
                  opt_.rank < opt_.world,
              "ChatLoader: invalid batch ", opt_.batch, ", grad_accum ", opt_.grad_accum,
              ", world ", opt_.world, ", rank ", opt_.rank);
  EMBER_CHECK(opt_.seq_len == rows_->seq_len, "ChatLoader: seq_len ", opt_.seq_len,
              " differs from the rows' ", rows_->seq_len);
  EMBER_CHECK(!rows_->rows.empty(), "ChatLoader: no conversation");
}

int64_t ChatLoader::conversation(int64_t step, int64_t micro, int64_t b) const {
  const int64_t slot = ((step * opt_.grad_accum + micro) * opt_.world + opt_.rank) * opt_.batch + b;
  return opt_.sequential ? slot % num_conversations() : shuffle_(slot);
}

ChatBatch ChatLoader::batch(int64_t step, int64_t micro) const {
  const int64_t B = opt_.batch, T = opt_.seq_len;
  ChatBatch out;
  out.tokens = Tensor::zeros({B, T + 1}, DType::Int64);
  out.trained = Tensor::zeros({B, T}, DType::Float32);
  int64_t* tokens = out.tokens.data<int64_t>();
  float* trained = out.trained.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    const ChatTokens& row = rows_->rows[static_cast<size_t>(conversation(step, micro, b))];
    const int64_t len = static_cast<int64_t>(row.ids.size());
    for (int64_t t = 0; t < len; ++t) tokens[b * (T + 1) + t] = row.ids[static_cast<size_t>(t)];
    for (int64_t t = 1; t < len; ++t) {
      if (!row.trained[static_cast<size_t>(t)]) continue;
      trained[b * T + t - 1] = 1.0f;
      ++out.trained_tokens;
    }
    out.lengths.push_back(len);
  }
  return out;
}

}  // namespace ember::data
