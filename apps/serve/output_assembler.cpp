// Engine events to text deltas and logprob entries (apps/serve/output_assembler.h).
#include "apps/serve/output_assembler.h"

#include <cmath>

namespace ember::apps::serve {

std::string token_text(const data::Tokenizer& tok, int64_t id) {
  if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size()) return {};
  const uint32_t u = static_cast<uint32_t>(id);
  return tok.decode(std::span<const uint32_t>(&u, 1));
}

OutputAssembler::OutputAssembler(const data::Tokenizer& tok, std::vector<std::string> stops,
                                 size_t text_offset0)
    : tok_(tok), stop_(std::move(stops)), chars_(text_offset0) {}

LogprobEntry OutputAssembler::entry(const inference::TokenLogprob& lp, size_t offset) const {
  LogprobEntry e;
  e.token = token_text(tok_, lp.token);
  if (!std::isnan(lp.logprob)) e.logprob = lp.logprob;
  for (const auto& [id, logprob] : lp.top) e.top.emplace_back(token_text(tok_, id), logprob);
  e.text_offset = offset;
  return e;
}

void OutputAssembler::take_token(int64_t token, const inference::TokenLogprob* lp, OutputDelta& out) {
  ++completion_tokens_;
  const std::string bytes = token_text(tok_, token);
  if (lp) out.logprobs.push_back(entry(*lp, chars_));
  chars_ += utf8_length(bytes);
  out.text += stop_.push(utf8_.push(bytes));
  if (stop_.stopped()) {
    finished_ = true;
    out.finished = true;
    out.finish_reason = "stop";
    out.by_stop_string = true;
  }
}

OutputDelta OutputAssembler::on_event(const inference::EngineEvent& ev) {
  OutputDelta out;
  if (finished_) return out;
  if (!ev.prompt_logprobs.empty()) {
    size_t offset = 0;
    for (const inference::TokenLogprob& lp : ev.prompt_logprobs) {
      out.prompt_logprobs.push_back(entry(lp, offset));
      offset += utf8_length(out.prompt_logprobs.back().token);
    }
  }
  if (ev.prompt_tokens > 0) prompt_tokens_ = ev.prompt_tokens;
  for (size_t i = 0; i < ev.tokens.size() && !finished_; ++i) {
    take_token(ev.tokens[i], i < ev.logprobs.size() ? &ev.logprobs[i] : nullptr, out);
  }
  if (!finished_ && ev.finished) {
    out.text += stop_.push(utf8_.finish());
    if (!stop_.stopped()) out.text += stop_.finish();
    finished_ = true;
    out.finished = true;
    out.by_stop_string = stop_.stopped();
    out.finish_reason = stop_.stopped() ? "stop" : inference::finish_reason_name(ev.reason);
  }
  return out;
}

}  // namespace ember::apps::serve
