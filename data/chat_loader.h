// Chat rows and their order (docs/formats.md#chat-data-jsonl). Every
// line of a chat file is one row of its first T+1 ids at most (longer ones
// are cut and counted), padded after the ids; padding is never trained. Row
// b of micro-step u of step s on rank r reads global slot
//   g = ((s*A + u)*W + r)*B + b
// which is conversation g mod n (sequential) or EpochShuffle's perm_e(g mod n),
// e = g / n (default): the same data for every world size.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "data/batch_loader.h"
#include "data/chat.h"
#include "data/epoch_shuffle.h"

namespace ember::data {

struct ChatRows {
  std::vector<ChatTokens> rows;  // row i: the first T+1 ids of line i, with their flags
  int64_t seq_len = 0;           // T
  int64_t truncated = 0;         // lines that had more than T+1 ids
};

// Renders every line (render_chat) and cuts it to T+1 ids. An Error when
// there is no line, T < 1, or the tokenizer lacks the ChatML specials and a
// line has messages.
ChatRows make_chat_rows(const Tokenizer& tokenizer, const std::vector<ChatLine>& lines,
                        int64_t seq_len);

// Shapes: B rows per rank, T = seq_len.
struct ChatBatch {
  Tensor tokens;                 // int64 [B, T+1]: inputs [:, :T], targets [:, 1:]; 0 pads
  Tensor trained;                // float32 [B, T]: 1 where target [:, t] is a label, else 0
  std::vector<int64_t> lengths;  // real (non-padding) ids per row, at most T+1
  int64_t trained_tokens = 0;    // the 1s of `trained`
};

// Ember's cross_entropy has no ignore index: ChatBatch carries the labels as
// the separate `trained` mask over the targets instead.
class ChatLoader {
 public:
  // options.seq_len must be rows->seq_len.
  ChatLoader(std::shared_ptr<const ChatRows> rows, BatchLoaderOptions options);
  ChatBatch batch(int64_t step, int64_t micro) const;
  // Conversation (line index) read by row b of (step, micro) on this rank.
  int64_t conversation(int64_t step, int64_t micro, int64_t b) const;
  int64_t num_conversations() const { return shuffle_.size(); }
  const BatchLoaderOptions& options() const { return opt_; }

 private:
  std::shared_ptr<const ChatRows> rows_;
  BatchLoaderOptions opt_;
  EpochShuffle shuffle_;
};

}  // namespace ember::data
