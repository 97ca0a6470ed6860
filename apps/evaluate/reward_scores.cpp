// `ember reward --score` (see reward_scores.h): lines parsed and rendered by data/, sides
// scored in batches with Transformer::scores, one JSON line printed per scored line.
#include "apps/evaluate/reward_scores.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "apps/common/model_io.h"
#include "apps/common/side_scores.h"
#include "core/error.h"
#include "data/preference.h"
#include "data/preference_pairs.h"

namespace ember::apps {
namespace {

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

std::vector<RewardLineScore> score_reward_file(const nn::Transformer& model,
                                               const data::Tokenizer& tokenizer,
                                               const std::string& path, int64_t batch_size) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "--data ", path, ": cannot open the file to score");
  const int64_t T = model.config().max_seq_len;
  std::vector<RewardLineScore> lines;
  std::vector<std::vector<uint32_t>> sides;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (blank(text)) continue;
    const std::string where = detail::concat(path, " line ", number);
    const data::ScoredLine s = data::parse_scored_line(text, where);
    try {
      sides.push_back(data::render_preference_side(tokenizer, s.pair, s.pair.chosen, T).ids);
      if (!s.completion)
        sides.push_back(data::render_preference_side(tokenizer, s.pair, s.pair.rejected, T).ids);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    lines.push_back(RewardLineScore{number, !s.completion, 0, 0});
  }
  EMBER_CHECK(!lines.empty(), path,
              ": no line to score (expected JSONL {\"prompt\", \"completion\"} or "
              "{\"prompt\", \"chosen\", \"rejected\"} lines)");
  const std::vector<float> r = score_sides(model, sides, batch_size);
  size_t at = 0;
  for (RewardLineScore& l : lines) {
    l.chosen = r[at++];
    if (l.pair) l.rejected = r[at++];
  }
  return lines;
}

std::string reward_score_json(const RewardLineScore& s) {
  char buffer[128];
  if (s.pair) {
    std::snprintf(buffer, sizeof buffer, "{\"line\": %lld, \"chosen\": %.9g, \"rejected\": %.9g}",
                  static_cast<long long>(s.line), static_cast<double>(s.chosen),
                  static_cast<double>(s.rejected));
  } else {
    std::snprintf(buffer, sizeof buffer, "{\"line\": %lld, \"reward\": %.9g}",
                  static_cast<long long>(s.line), static_cast<double>(s.chosen));
  }
  return buffer;
}

int run_reward_score(const RewardScoreOptions& o) {
  const LoadedModel lm = load_reward_model(o.checkpoint, o.base);
  for (const RewardLineScore& s : score_reward_file(*lm.model, lm.tokenizer, o.data, o.batch_size))
    std::printf("%s\n", reward_score_json(s).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace ember::apps
