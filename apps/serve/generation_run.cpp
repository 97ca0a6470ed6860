// Streaming and whole responses of one generation (apps/serve/generation_run.h).
#include "apps/serve/generation_run.h"

#include "apps/serve/api_error.h"
#include "apps/serve/sse.h"
#include "apps/common/utf8_text.h"

namespace ember::apps::serve {
namespace {

constexpr std::chrono::milliseconds kPoll{100};

ApiError shut_down_error() {
  return ApiError(503, "the server shut down before this request finished", "", "shutting_down");
}

void append(std::vector<LogprobEntry>& to, const std::vector<LogprobEntry>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

GenerationRun::GenerationRun(std::shared_ptr<inference::RequestHandle> handle, const ApiRequest& request,
                             std::string echo_text, int64_t prompt_tokens, ResponseMeta meta,
                             ServeState& state)
    : handle_(std::move(handle)),
      endpoint_(request.endpoint),
      echo_(request.echo),
      wants_logprobs_(request.logprobs >= 0),
      include_usage_(request.include_usage),
      echo_text_(std::move(echo_text)),
      prompt_tokens_(prompt_tokens),
      meta_(std::move(meta)),
      state_(state),
      out_(*state.model.tokenizer, request.stop, request.echo ? utf8_length(echo_text_) : 0) {}

GenerationRun::~GenerationRun() {
  if (!done_) {
    handle_->cancel();
    finish("cancelled");
  }
}

void GenerationRun::finish(const std::string& reason) {
  done_ = true;
  state_.metrics.count_finish(reason);
}

bool GenerationRun::write_checked(const Writer& write, const std::string& text) {
  if (text.empty()) return true;
  if (!write(text)) return false;
  last_write_ = std::chrono::steady_clock::now();
  return true;
}

ojson GenerationRun::usage() const {
  return usage_json(prompt_tokens_, out_.completion_tokens());
}

std::optional<OutputDelta> GenerationRun::next_delta(const Probe& keep_alive,
                                                     std::chrono::milliseconds interval) {
  while (true) {
    if (std::chrono::steady_clock::now() - last_write_ >= interval) {
      if (!keep_alive()) return std::nullopt;
      last_write_ = std::chrono::steady_clock::now();
    }
    if (std::optional<inference::EngineEvent> ev = handle_->next(kPoll)) {
      OutputDelta d = out_.on_event(*ev);
      if (d.by_stop_string) handle_->cancel();  // the output is complete; free the sequence now
      return d;
    }
  }
}

bool GenerationRun::stream(const Writer& write) {
  auto gone = [&] {
    handle_->cancel();
    finish("cancelled");
    return false;
  };
  auto send = [&](const ojson& chunk) { return write_checked(write, sse_event(chunk)); };
  if (endpoint_ == Endpoint::Chat &&
      !send(chunk_json(meta_, "", nullptr, std::nullopt, true, include_usage_))) {
    return gone();
  }
  bool first = true;
  while (true) {
    std::optional<OutputDelta> d = next_delta(
        [&] { return write_checked(write, kSseKeepAlive); }, 2 * state_.keep_alive_interval);
    if (!d) return gone();
    if (d->finish_reason == "cancelled") {
      write_checked(write, sse_event(error_json(shut_down_error())));
      write_checked(write, kSseDone);
      finish("cancelled");
      return true;
    }
    std::string text = first && echo_ ? echo_text_ + d->text : d->text;
    std::vector<LogprobEntry> entries = d->prompt_logprobs;
    append(entries, d->logprobs);
    first = false;
    const std::optional<std::string> reason =
        d->finished ? std::optional(d->finish_reason) : std::nullopt;
    if (!text.empty() || !entries.empty() || reason) {
      const ojson logprobs = logprobs_json(endpoint_, wants_logprobs_ && !entries.empty(), entries);
      if (!send(chunk_json(meta_, text, logprobs, reason, false, include_usage_))) return gone();
    }
    if (reason) {
      if (include_usage_ && !send(usage_chunk_json(meta_, usage()))) return gone();
      if (!write_checked(write, kSseDone)) return gone();
      finish(*reason);
      return true;
    }
  }
}

bool GenerationRun::whole(const Writer& write) {
  // A JSON body may start with spaces: they are its keep-alive.
  const std::optional<WholeBody> body = whole_body([&] { return write_checked(write, " "); });
  if (!body) return false;
  const bool written = write_checked(write, body->json);
  return written || body->status != 200;  // the shutdown's error body ends the response anyway
}

std::optional<GenerationRun::WholeBody> GenerationRun::whole_body(const Probe& alive) {
  std::string text = echo_ ? echo_text_ : "";
  std::vector<LogprobEntry> entries;
  while (true) {
    std::optional<OutputDelta> d = next_delta(alive, state_.keep_alive_interval);
    if (!d) {
      handle_->cancel();
      finish("cancelled");
      return std::nullopt;
    }
    if (d->finish_reason == "cancelled") {
      finish("cancelled");
      const ApiError e = shut_down_error();
      return WholeBody{e.status(), json_text(error_json(e))};
    }
    append(entries, d->prompt_logprobs);
    append(entries, d->logprobs);
    text += d->text;
    if (d->finished) {
      const ojson body = response_json(meta_, text, d->finish_reason,
                                       logprobs_json(endpoint_, wants_logprobs_, entries), usage());
      finish(d->finish_reason);
      return WholeBody{200, json_text(body)};
    }
  }
}

}  // namespace ember::apps::serve
