// `ember serve` output text: UTF-8-safe incremental detokenization (a character
// split across tokens is never split across chunks), stop strings (cut before
// the first one, held back while they may be starting; the same output however
// the text arrives), and the assembler from engine events (byte tokenizer:
// token id = byte) with its logprob entries and text offsets.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/serve/output_assembler.h"
#include "apps/serve/stop_strings.h"
#include "apps/common/utf8_text.h"

using namespace ember;
using namespace ember::apps;
using namespace ember::apps::serve;

namespace {

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// The reference: the text before the first occurrence of any stop string.
std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, text.find(s));
  return first == std::string::npos ? text : text.substr(0, first);
}

inference::EngineEvent tokens_event(const std::string& bytes, bool finished = false,
                             inference::FinishReason reason = inference::FinishReason::Length) {
  inference::EngineEvent ev;
  for (char c : bytes) ev.tokens.push_back(static_cast<unsigned char>(c));
  ev.finished = finished;
  ev.reason = reason;
  return ev;
}

const data::Tokenizer& byte_tokenizer() {
  static const data::Tokenizer tok = data::Tokenizer::bytes({"<|endoftext|>"});
  return tok;
}

}  // namespace

TEST_CASE("serve: incomplete_utf8_tail finds an unfinished character at the end", "[serve]") {
  CHECK(incomplete_utf8_tail("") == 0);
  CHECK(incomplete_utf8_tail("abc") == 0);
  CHECK(incomplete_utf8_tail("a\xC3") == 1);
  CHECK(incomplete_utf8_tail("a\xC3\xA9") == 0);
  CHECK(incomplete_utf8_tail("\xE2\x82") == 2);
  CHECK(incomplete_utf8_tail("\xE2\x82\xAC") == 0);
  CHECK(incomplete_utf8_tail("\xF0\x9F\x98") == 3);
  CHECK(incomplete_utf8_tail("\xF0\x9F\x98\x80") == 0);
  CHECK(incomplete_utf8_tail("\x80\x80") == 0);  // stray continuation bytes: nothing to wait for
  CHECK(utf8_length("h\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") == 4);
}

TEST_CASE("UTF-8 check and repair: the first invalid byte, and U+FFFD as serve's JSON writes it", "[serve]") {
  CHECK(first_invalid_utf8("") == std::string::npos);
  CHECK(first_invalid_utf8("h\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF") == std::string::npos);
  CHECK(first_invalid_utf8("ab\xFF") == 2);
  CHECK(first_invalid_utf8("a\xC3") == 1);              // cut off by the end
  CHECK(first_invalid_utf8("a\xC0\xAF") == 1);         // overlong '/'
  CHECK(first_invalid_utf8("a\xE0\x80\xAF") == 1);     // overlong
  CHECK(first_invalid_utf8("ab\xED\xA0\x80") == 2);    // a surrogate
  CHECK(first_invalid_utf8("\xF4\x90\x80\x80") == 0);  // above U+10FFFF
  CHECK(first_invalid_utf8("\xC3\xA9\x80") == 2);       // a stray continuation byte
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(replace_invalid_utf8("a\xFF" "b") == "a" + fffd + "b");
  CHECK(replace_invalid_utf8("\xE2\x82" "a") == fffd + "a");  // one maximal subpart, one U+FFFD
  CHECK(replace_invalid_utf8("\xC3\xC3\xA9") == fffd + "\xC3\xA9");
  CHECK(replace_invalid_utf8("\xED\xA0\x80") == fffd + fffd + fffd);
  // The same bytes as nlohmann::json's dump with error_handler_t::replace (serve's responses),
  // on random byte strings rich in lead and continuation bytes.
  std::mt19937 rng(7);
  const std::string alphabet = "a\x80\x8F\x90\x9F\xA0\xBF\xC0\xC2\xDF\xE0\xE1\xED\xEF\xF0\xF1\xF4\xF5\xFF";
  for (int n = 0; n < 5000; ++n) {
    std::string bytes(std::uniform_int_distribution<size_t>(0, 10)(rng), 'a');
    for (char& c : bytes) c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    const std::string dumped = nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string served = nlohmann::json::parse(dumped).get<std::string>();
    INFO(nlohmann::json(bytes).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
    REQUIRE(replace_invalid_utf8(bytes) == served);
    CHECK((first_invalid_utf8(bytes) == std::string::npos) == (served == bytes));
  }
}

TEST_CASE("serve: the UTF-8 assembler never splits a character, byte by byte", "[serve]") {
  const std::string text = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80!";
  Utf8Assembler a;
  std::string joined;
  for (char c : text) {
    const std::string piece = a.push(std::string(1, c));
    CHECK(valid_utf8(piece));
    joined += piece;
  }
  joined += a.finish();
  CHECK(joined == text);
  Utf8Assembler b;
  CHECK(b.push("\xF0\x9F") == "");
  CHECK(b.finish() == "\xF0\x9F");  // the output ended inside a character: the bytes as they are
}

TEST_CASE("serve: stop strings: the text before the first one, held back while one may start", "[serve]") {
  StopMatcher m({"END"});
  CHECK(m.push("abcE") == "abc");
  CHECK(m.push("N") == "");
  CHECK(!m.stopped());
  CHECK(m.push("D and more") == "");
  CHECK(m.stopped());
  CHECK(m.push("x") == "");
  CHECK(m.finish() == "");

  StopMatcher n({"END"});
  CHECK(n.push("E") == "");
  CHECK(n.push("x") == "Ex");
  CHECK(n.push("EN") == "");
  CHECK(n.finish() == "EN");  // ended without the stop string: the held text is output

  StopMatcher earliest({"b", "cd"});
  CHECK(earliest.push("acdb") == "a");

  StopMatcher overlap({"ab"});
  CHECK(overlap.push("a") == "");
  CHECK(overlap.push("a") == "a");
  CHECK(overlap.push("b") == "");
  CHECK(overlap.stopped());
}

TEST_CASE("serve: stop strings give the same output however the text is split", "[serve]") {
  std::mt19937 gen(17);
  const std::string alphabet = "abc\xC3\xA9";
  for (int trial = 0; trial < 400; ++trial) {
    std::string text;
    const int len = static_cast<int>(gen() % 30);
    for (int i = 0; i < len; ++i) text += alphabet[gen() % alphabet.size()];
    std::vector<std::string> stops;
    const int n_stops = 1 + static_cast<int>(gen() % 3);
    for (int s = 0; s < n_stops; ++s) {
      std::string stop;
      const int stop_len = 1 + static_cast<int>(gen() % 3);
      for (int i = 0; i < stop_len; ++i) stop += "abc"[gen() % 3];
      stops.push_back(stop);
    }
    StopMatcher m(stops);
    std::string out;
    size_t at = 0;
    while (at < text.size()) {
      const size_t piece = 1 + gen() % 4;
      out += m.push(text.substr(at, piece));
      at += piece;
    }
    out += m.finish();
    INFO("text " << text << " stop " << stops[0]);
    CHECK(out == cut_at_stop(text, stops));
    CHECK(m.stopped() == (cut_at_stop(text, stops) != text));
  }
}

TEST_CASE("serve: the assembler cuts at a stop string and counts the tokens up to its end", "[serve]") {
  const std::string output = "h\xC3\xA9llo END tail";
  OutputAssembler whole(byte_tokenizer(), {"END"});
  const OutputDelta d = whole.on_event(tokens_event(output));
  CHECK(d.text == "h\xC3\xA9llo ");
  CHECK(d.finished);
  CHECK(d.finish_reason == "stop");
  CHECK(d.by_stop_string);
  CHECK(whole.completion_tokens() == 10);  // "h", two bytes of é, "llo ", "END"
  CHECK(whole.finished());
  CHECK(whole.on_event(tokens_event("more")).text.empty());

  // One token per event: the same text, each piece whole characters, the same count.
  OutputAssembler streamed(byte_tokenizer(), {"END"});
  std::string joined;
  bool finished = false;
  for (char c : output) {
    const OutputDelta piece = streamed.on_event(tokens_event(std::string(1, c)));
    CHECK(valid_utf8(piece.text));
    CHECK(piece.text.find('E') == std::string::npos);  // no part of the stop string ever leaves
    joined += piece.text;
    if (piece.finished) {
      finished = true;
      break;
    }
  }
  CHECK(finished);
  CHECK(joined == d.text);
  CHECK(streamed.completion_tokens() == whole.completion_tokens());
}

TEST_CASE("serve: the assembler flushes held text when the engine finishes", "[serve]") {
  OutputAssembler a(byte_tokenizer(), {"END"});
  CHECK(a.on_event(tokens_event("abE")).text == "ab");
  const OutputDelta d = a.on_event(tokens_event("N", true, inference::FinishReason::Length));
  CHECK(d.text == "EN");
  CHECK(d.finish_reason == "length");
  CHECK(!d.by_stop_string);
  CHECK(a.completion_tokens() == 4);

  OutputAssembler s(byte_tokenizer(), {});
  CHECK(s.on_event(tokens_event("a\xC3")).text == "a");
  const OutputDelta end = s.on_event(tokens_event("", true, inference::FinishReason::Stop));
  CHECK(end.text == "\xC3");  // the unfinished character, as bytes
  CHECK(end.finish_reason == "stop");
  CHECK(!end.by_stop_string);

  OutputAssembler c(byte_tokenizer(), {});
  CHECK(c.on_event(tokens_event("", true, inference::FinishReason::Cancelled)).finish_reason ==
        "cancelled");
}

TEST_CASE("serve: logprob entries carry token text, top alternatives and character offsets", "[serve]") {
  OutputAssembler a(byte_tokenizer(), {}, /*text_offset0=*/3);
  inference::EngineEvent ev;
  ev.prompt_tokens = 3;
  ev.prompt_logprobs = {{'a', NAN, {}}, {0xC3, -1.5, {{'b', -0.5}}}, {0xA9, -0.25, {}}};
  ev.tokens = {'x', 0xE2, 0x82, 0xAC, 'y'};
  for (int64_t t : ev.tokens)
    ev.logprobs.push_back({t, -0.1 * static_cast<double>(t % 7), {{'z', -0.01}}});
  ev.logprobs[0].top.push_back({300, -2.0});  // a row outside the tokenizer: empty text
  const OutputDelta d = a.on_event(ev);
  REQUIRE(d.prompt_logprobs.size() == 3);
  CHECK(!d.prompt_logprobs[0].logprob);
  CHECK(d.prompt_logprobs[0].token == "a");
  CHECK(d.prompt_logprobs[1].logprob == std::optional<double>(-1.5));
  CHECK(d.prompt_logprobs[1].top == std::vector<std::pair<std::string, double>>{{"b", -0.5}});
  CHECK(d.prompt_logprobs[1].text_offset == 1);
  CHECK(d.prompt_logprobs[2].text_offset == 2);
  REQUIRE(d.logprobs.size() == 5);
  CHECK(d.logprobs[0].token == "x");
  CHECK(d.logprobs[0].text_offset == 3);
  CHECK(d.logprobs[0].top.back().first.empty());
  CHECK(d.logprobs[1].text_offset == 4);
  CHECK(d.logprobs[4].text_offset == 5);  // after x and the three bytes of one character
  CHECK(d.text == "x\xE2\x82\xACy");
  CHECK(a.prompt_tokens() == 3);
}
