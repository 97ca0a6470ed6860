// Preference data: both sides of chat-form and text-form pairs against id
// sequences written by hand (byte tokenizer: id = byte, specials 256-258), the
// scored flags (completion tokens with a position before them), the cut at
// T+1, dropped pairs and their count, the margin, every bad input's exact
// message, the tokenizer's required specials, and the held-out split.
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>

#include "data/epoch_shuffle.h"
#include "data/held_out.h"
#include "data/preference.h"
#include "data/preference_pairs.h"
#include "data/tokenizer/bpe_model.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::data;

namespace {

constexpr uint32_t kEot = 256, kStart = 257, kEnd = 258;

Tokenizer chat_bytes() {
  return Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
}

// Expected ids and scored flags, built by hand: bytes of a literal, or one special.
struct Expect {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> scored;
  Expect& text(const std::string& s, bool t) {
    for (unsigned char c : s) ids.push_back(c), scored.push_back(t);
    return *this;
  }
  Expect& id(uint32_t i, bool t) {
    ids.push_back(i), scored.push_back(t);
    return *this;
  }
  // The first n ids and flags.
  Expect first(size_t n) const {
    Expect e = *this;
    e.ids.resize(n), e.scored.resize(n);
    return e;
  }
};

void check_side(const PreferenceSide& side, const Expect& e) {
  CHECK(side.ids == e.ids);
  CHECK(side.scored == e.scored);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A multi-turn prompt (an earlier assistant turn, never scored) and two answers.
const std::string kChatLine =
    R"({"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},)"
    R"( {"role": "assistant", "content": "Hey"}, {"role": "user", "content": "2+2?"}],)"
    R"( "chosen": [{"role": "assistant", "content": "4"}],)"
    R"( "rejected": [{"role": "assistant", "content": "5!"}]})";

// kChatLine's prompt by hand: 11 + 10 + 16 + 12 = 49 ids.
Expect chat_prompt() {
  Expect e;
  e.id(kStart, 0).text("system\nS", 0).id(kEnd, 0).text("\n", 0);
  e.id(kStart, 0).text("user\nHi", 0).id(kEnd, 0).text("\n", 0);
  e.id(kStart, 0).text("assistant\nHey", 0).id(kEnd, 0).text("\n", 0);
  e.id(kStart, 0).text("user\n2+2?", 0).id(kEnd, 0).text("\n", 0);
  return e;
}

Expect chat_side(const std::string& answer) {
  Expect e = chat_prompt();
  e.id(kStart, 0).text("assistant\n", 0).text(answer, 1).id(kEnd, 1).text("\n", 0);
  return e;
}

PreferenceLine text_line(const std::string& prompt, const std::string& chosen,
                         const std::string& rejected, int64_t line = 0) {
  PreferenceLine l;
  l.is_text = true;
  l.prompt_text = prompt, l.chosen = chosen, l.rejected = rejected, l.line = line;
  return l;
}

}  // namespace

TEST_CASE("preference chat form: ChatML of the prompt, then the one assistant message") {
  const Tokenizer tok = chat_bytes();
  const PreferenceLine line = parse_preference_line(kChatLine, "p line 1");
  REQUIRE_FALSE(line.is_text);
  REQUIRE(line.prompt.size() == 4);
  CHECK(line.prompt[2].role == "assistant");
  CHECK(line.prompt[3].content == "2+2?");
  CHECK(line.chosen == "4");
  CHECK(line.rejected == "5!");
  CHECK(line.margin == 0.0);
  REQUIRE(chat_prompt().ids.size() == 49);

  const PreferencePair pair = render_preference_pair(tok, line, 1024);
  check_side(pair.chosen, chat_side("4"));
  check_side(pair.rejected, chat_side("5!"));
  CHECK(pair.chosen.ids.size() == 49 + 14);
  CHECK(pair.margin == 0.0);
  CHECK(has_scored_tokens(pair));
}

TEST_CASE("preference chat form: an answer token straddling the role is scored") {
  // Bytes, 256 = "\n\n" (one merge), then the three specials: "assistant\n" + "\n\n"
  // is encoded as one string, one pre-token "\n\n\n": ids 256 (holding a content
  // byte) and 10.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const char* s : {"\n\n", "<|endoftext|>", "<|im_start|>", "<|im_end|>"}) tokens.push_back(s);
  const Tokenizer tok(BpeModel(tokens, {BpeMerge{10, 10, 256}}),
                      {{"<|endoftext|>", 257}, {"<|im_start|>", 258}, {"<|im_end|>", 259}});
  PreferenceLine line;
  line.prompt = {{"user", "q"}};
  line.chosen = "\n\n", line.rejected = "y";
  const PreferencePair pair = render_preference_pair(tok, line, 64);
  Expect prompt;
  prompt.id(258, 0).text("user\nq", 0).id(259, 0).text("\n", 0);
  Expect chosen = prompt, rejected = prompt;
  chosen.id(258, 0).text("assistant", 0).id(256, 1).text("\n", 1).id(259, 1).text("\n", 0);
  rejected.id(258, 0).text("assistant\n", 0).text("y", 1).id(259, 1).text("\n", 0);
  check_side(pair.chosen, chosen);
  check_side(pair.rejected, rejected);
}

TEST_CASE("preference text form: prompt and completion encoded apart, then <|endoftext|>") {
  // 256 = "ab" (one merge): encoded together "a" + "b" would be one id.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.push_back("ab");
  tokens.push_back("<|endoftext|>");
  const Tokenizer tok(BpeModel(tokens, {BpeMerge{'a', 'b', 256}}), {{"<|endoftext|>", 257}});
  REQUIRE(tok.encode("ab") == std::vector<uint32_t>{256});

  const PreferenceLine line =
      parse_preference_line(R"({"prompt": "xa", "chosen": "b", "rejected": "abc"})", "p line 1");
  REQUIRE(line.is_text);
  CHECK(line.prompt_text == "xa");
  const PreferencePair pair = render_preference_pair(tok, line, 16);
  check_side(pair.chosen, Expect().text("xa", 0).text("b", 1).id(257, 1));
  check_side(pair.rejected, Expect().text("xa", 0).id(256, 1).text("c", 1).id(257, 1));
  // Special-token names in the text are recognised, as in a training corpus.
  const PreferencePair eot = render_preference_pair(tok, text_line("<|endoftext|>", "x", "y"), 16);
  check_side(eot.chosen, Expect().id(257, 0).text("x", 1).id(257, 1));
  // A tokenizer without ChatML specials is enough for the text form.
  CHECK(tok.find_special("<|im_start|>") == std::nullopt);
}

TEST_CASE("preference sides are cut to T+1 ids, scored only with a position before them") {
  const Tokenizer tok = chat_bytes();
  // Prompt "pq" (ids 0, 1), completion "xyz" + <|endoftext|> at ids 2-5.
  const PreferenceLine line = text_line("pq", "xyz", "w");
  const Expect full = Expect().text("pq", 0).text("xyz", 1).id(kEot, 1);

  SECTION("T = 4: the first 5 ids, the completion's last id cut") {
    check_side(render_preference_pair(tok, line, 4).chosen, full.first(5));
  }
  SECTION("T = 2: the completion's first id is index 2 = T, inside the window") {
    const PreferencePair p = render_preference_pair(tok, line, 2);
    check_side(p.chosen, full.first(3));
    CHECK(p.chosen.scored == std::vector<uint8_t>{0, 0, 1});
    CHECK(has_scored_tokens(p));
  }
  SECTION("T = 1: the completion starts at index 2 = T+1, outside: nothing scored") {
    const PreferencePair p = render_preference_pair(tok, line, 1);
    check_side(p.chosen, full.first(2));
    check_side(p.rejected, Expect().text("pq", 0));
    CHECK_FALSE(has_scored_tokens(p));
  }
  SECTION("an empty prompt: the completion's id 0 has no position before it") {
    const PreferencePair p = render_preference_pair(tok, text_line("", "xy", "z"), 8);
    check_side(p.chosen, Expect().text("x", 0).text("y", 1).id(kEot, 1));
    check_side(p.rejected, Expect().text("z", 0).id(kEot, 1));
    CHECK(has_scored_tokens(p));
  }
  SECTION("chat form: the cut inside the answer") {
    const PreferenceLine chat = parse_preference_line(kChatLine, "p line 1");
    // 49 prompt ids, 11 of the assistant header, then "5" at index 60, "!" at 61.
    const PreferencePair p = render_preference_pair(tok, chat, 60);
    check_side(p.rejected, chat_side("5!").first(61));
    CHECK(p.rejected.scored.back() == 1);
    CHECK(std::count(p.rejected.scored.begin(), p.rejected.scored.end(), 1) == 1);
    // One id fewer: the answer begins at index 60 = T+1, outside the window.
    CHECK_FALSE(has_scored_tokens(render_preference_pair(tok, chat, 59)));
  }
  // One side without a scored token is enough to drop a pair.
  PreferencePair half;
  half.chosen = PreferenceSide{{1, 2}, {0, 1}};
  half.rejected = PreferenceSide{{1, 2}, {0, 0}};
  CHECK_FALSE(has_scored_tokens(half));
  std::swap(half.chosen, half.rejected);
  CHECK_FALSE(has_scored_tokens(half));
  half.chosen.scored[1] = 1;
  CHECK(has_scored_tokens(half));
  CHECK_THAT(error_of([&] { render_preference_pair(tok, line, 0); }),
             Catch::Equals("preference data: seq_len must be at least 1, got 0"));
}

TEST_CASE("preference pairs of a file: pairs without a scored token dropped and counted") {
  testing::TempDir dir("pref");
  dir.write("pairs.jsonl",
            R"({"prompt": "ab", "chosen": "x", "rejected": "y", "margin": 1.5})"
            "\n\n"  // a blank line: skipped, counted
            R"({"prompt": "a long prompt", "chosen": "x", "rejected": "y"})"
            "\n"
            R"({"prompt": "", "chosen": "a long answer", "rejected": "no", "margin": -2})"
            "\n");
  const std::vector<PreferenceLine> lines = read_preference_file(dir / "pairs.jsonl");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].line == 1);
  CHECK(lines[1].line == 3);
  CHECK(lines[2].line == 4);
  CHECK(lines[0].margin == 1.5);
  CHECK(lines[1].margin == 0.0);
  CHECK(lines[2].margin == -2.0);

  const PreferencePairs pp = make_preference_pairs(chat_bytes(), lines, 4, dir / "pairs.jsonl");
  CHECK(pp.seq_len == 4);
  CHECK(pp.dropped_lines == std::vector<int64_t>{3});  // "a long prompt" fills the 5 ids
  REQUIRE(pp.pairs.size() == 2);
  CHECK(pp.truncated == 1);  // "a long answer", cut to 5 ids
  CHECK(pp.pairs[0].line == 1);
  CHECK(pp.pairs[0].margin == 1.5);
  check_side(pp.pairs[0].chosen, Expect().text("ab", 0).text("x", 1).id(kEot, 1));
  check_side(pp.pairs[0].rejected, Expect().text("ab", 0).text("y", 1).id(kEot, 1));
  CHECK(pp.pairs[1].line == 4);
  CHECK(pp.pairs[1].margin == -2.0);
  check_side(pp.pairs[1].chosen, Expect().text("a", 0).text(" lon", 1));
  check_side(pp.pairs[1].rejected, Expect().text("n", 0).text("o", 1).id(kEot, 1));

  // A wider window keeps all three, none cut.
  const PreferencePairs wide = make_preference_pairs(chat_bytes(), lines, 15, "pairs.jsonl");
  CHECK(wide.pairs.size() == 3);
  CHECK(wide.dropped_lines.empty());
  CHECK(wide.truncated == 0);

  // Every pair dropped: an Error naming the file.
  CHECK(error_of([&] { make_preference_pairs(chat_bytes(), {lines[1]}, 4, "pairs.jsonl"); }) ==
        "pairs.jsonl: no pair left: the only pair has a side whose completion starts after the "
        "first T+1 = 5 tokens (a larger --seq-len, or shorter prompts)");
  CHECK(error_of([&] {
          make_preference_pairs(chat_bytes(), {lines[1], lines[1]}, 4, "pairs.jsonl");
        }) ==
        "pairs.jsonl: no pair left: each of the 2 pairs has a side whose completion starts "
        "after the first T+1 = 5 tokens (a larger --seq-len, or shorter prompts)");
  CHECK(error_of([&] { make_preference_pairs(chat_bytes(), {}, 4, "pairs.jsonl"); }) ==
        "pairs.jsonl: no preference pair");
}

TEST_CASE("preference data needs the tokenizer's specials of its form") {
  const PreferenceLine chat = parse_preference_line(kChatLine, "p line 1");
  const Tokenizer no_chatml = Tokenizer::bytes({"<|endoftext|>", "<|im_start|>"});
  const std::string chatml_error = error_of([&] { chat_specials(no_chatml); });
  REQUIRE_THAT(chatml_error, Catch::Contains("no <|im_end|> special token"));
  CHECK(error_of([&] { render_preference_pair(no_chatml, chat, 64); }) == chatml_error);
  CHECK(error_of([&] { make_preference_pairs(no_chatml, {chat}, 64, "f"); }) == chatml_error);

  const std::string eot_error =
      "the tokenizer has no <|endoftext|> special token, which ends each side of text-form "
      "preference data: append it with --add-chat-tokens (a new embedding row)";
  const Tokenizer chatml_only = Tokenizer::bytes({"<|im_start|>", "<|im_end|>"});
  const PreferenceLine text = text_line("p", "a", "b");
  CHECK(error_of([&] { render_preference_pair(chatml_only, text, 64); }) == eot_error);
  CHECK(error_of([&] { make_preference_pairs(chatml_only, {text}, 64, "f"); }) == eot_error);
  // Each form needs only its own.
  CHECK(render_preference_pair(chatml_only, chat, 64).chosen.ids.size() == 63);
  CHECK(render_preference_pair(Tokenizer::bytes({"<|endoftext|>"}), text, 64).chosen.ids.size() ==
        3);
}

TEST_CASE("bad preference lines: one line naming the file, the line and the field") {
  testing::TempDir dir("pref");
  const std::string good = R"({"prompt": "p", "chosen": "a", "rejected": "b"})";
  const std::string user = R"({"role": "user", "content": "q"})";
  const std::string answer = R"([{"role": "assistant", "content": "a"}])";
  const auto chat = [&](const std::string& prompt, const std::string& chosen) {
    return R"({"prompt": )" + prompt + R"(, "chosen": )" + chosen + R"(, "rejected": )" + answer +
           "}";
  };
  const std::string one = "expected a list of messages with one assistant message";
  const std::string missing = R"(: missing (a pair line has "prompt", "chosen" and "rejected"))";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"{not json", "not JSON (syntax error at byte 3)"},
      {"[1, 2]", R"(not a JSON object (expected {"prompt": ..., "chosen": ..., "rejected": ...}))"},
      {R"({"chosen": "a", "rejected": "b"})", R"("prompt")" + missing},
      {R"({"prompt": "p", "rejected": "b"})", R"("chosen")" + missing},
      {R"({"prompt": "p", "chosen": "a"})", R"("rejected")" + missing},
      {R"({"prompt": 3, "chosen": "a", "rejected": "b"})",
       R"("prompt": expected a string or a list of messages (got a number))"},
      {R"({"prompt": "p", "chosen": ["a"], "rejected": "b"})",
       R"("chosen": expected a string (got a list; "prompt" is a string))"},
      {R"({"prompt": "p", "chosen": "a", "rejected": ""})",
       R"("rejected": an empty string (a side needs a non-empty completion))"},
      {chat("[" + user + "]", R"("a")"),
       R"("chosen": )" + one + R"( (got a string; "prompt" is a list of messages))"},
      {chat("[" + user + "]", "[]"), R"("chosen": )" + one + " (got 0 messages)"},
      {chat("[" + user + "]", R"([{"role": "assistant", "content": "a"}, )" + user + "]"),
       R"("chosen": )" + one + " (got 2 messages)"},
      {chat("[" + user + "]", "[" + user + "]"), R"("chosen": )" + one + " (got a user message)"},
      {chat("[" + user + "]", R"([{"role": "assistant", "content": ""}])"),
       R"("chosen"[0]: empty "content" (a side needs a non-empty completion))"},
      {chat("[" + user + "]", R"([{"role": "assistant", "content": 1}])"),
       R"("chosen"[0]: no string "content")"},
      {chat("[]", answer),
       R"("prompt": an empty list (expected messages ending with a user message))"},
      {chat("[" + user + R"(, {"role": "assistant", "content": "x"}])", answer),
       R"("prompt": its last message is the assistant's (expected messages ending with a user message))"},
      {chat(R"(["q"])", answer),
       R"("prompt"[0]: expected a message {"role": ..., "content": "..."} (got a string))"},
      {chat("[" + user + R"(, {"role": "tool", "content": "x"}])", answer),
       R"("prompt"[1]: unknown role "tool" (expected system, user or assistant))"},
      {chat(R"([{"content": "q"}])", answer), R"("prompt"[0]: no string "role")"},
      {R"({"prompt": "p", "chosen": "a", "rejected": "b", "margin": "1"})",
       R"("margin": expected a finite number (got a string))"},
      {R"({"prompt": "p", "chosen": "a", "rejected": "b", "margin": null})",
       R"("margin": expected a finite number (got null))"},
      {R"({"prompt": "p", "chosen": "a", "rejected": "b", "margin": 1e999})",
       R"(number overflow parsing '1e999' ("margin" must be a finite number))"},
      {chat("[" + user + "]", answer),
       R"("prompt": a list of messages (the chat form), but line 1's is a string (the text form))"
       " (one form per file)"},
  };
  const std::string file = dir / "bad.jsonl";
  for (const auto& [line, expected] : cases) {
    dir.write("bad.jsonl", good + "\n" + line + "\n" + good + "\n");
    CHECK(error_of([&] { read_preference_file(file); }) == file + " line 2: " + expected);
  }
  // A text line after chat lines: the mix named the other way round.
  dir.write("mix.jsonl", chat("[" + user + "]", answer) + "\n\n" + good + "\n");
  CHECK(error_of([&] { read_preference_file(dir / "mix.jsonl"); }) ==
        dir / "mix.jsonl" +
            R"( line 3: "prompt": a string (the text form), but line 1's is a list of messages)"
            " (the chat form) (one form per file)");
  dir.write("empty.jsonl", "");
  CHECK(error_of([&] { read_preference_file(dir / "empty.jsonl"); }) ==
        dir / "empty.jsonl" + ": empty preference file (no pair line)");
  dir.write("blank.jsonl", "\n \r\n");
  CHECK(error_of([&] { read_preference_file(dir / "blank.jsonl"); }) ==
        dir / "blank.jsonl" + ": empty preference file (no pair line)");
  CHECK(error_of([&] { read_preference_file(dir / "missing.jsonl"); }) ==
        "cannot open preference file " + dir / "missing.jsonl");
  // Extra keys are ignored; an integer margin is a number.
  const PreferenceLine extra = parse_preference_line(
      R"({"id": 7, "prompt": "p", "chosen": "a", "rejected": "b", "margin": 2})", "p line 1");
  CHECK(extra.margin == 2.0);
  CHECK(extra.chosen == "a");
}

TEST_CASE("held-out split: floor(n x fraction) items, the first of epoch -1's permutation") {
  const int64_t n = 40;
  const std::vector<bool> held = held_out_items(n, 0.25, 7);
  REQUIRE(held.size() == 40);
  CHECK(std::count(held.begin(), held.end(), true) == 10);
  const std::vector<int64_t> perm = epoch_permutation(n, 7, -1);
  for (int64_t i = 0; i < n; ++i) {
    const auto rank = std::find(perm.begin(), perm.end(), i) - perm.begin();
    CHECK(held[static_cast<size_t>(i)] == (rank < 10));
  }
  CHECK(held_out_items(n, 0.25, 8) != held);
  CHECK(held_out_items(n, 0.25, 7) == held);
  const std::vector<bool> none = held_out_items(19, 0.05, 7);  // floor(0.95) = 0
  CHECK(std::count(none.begin(), none.end(), true) == 0);
  const std::vector<bool> one = held_out_items(20, 0.05, 7);  // floor(1.0) = 1
  CHECK(std::count(one.begin(), one.end(), true) == 1);
  CHECK(error_of([] { held_out_items(4, 1.0, 7); }) ==
        "held-out split: fraction must be in [0, 1), got 1 of 4 items");
}

TEST_CASE("lines to score: a pair, or a prompt with one completion rendered as a pair side") {
  const Tokenizer tok = chat_bytes();
  SECTION("a pair line is parse_preference_line's") {
    const ScoredLine s = parse_scored_line(kChatLine, "s.jsonl line 1");
    CHECK_FALSE(s.completion);
    CHECK(s.pair.chosen == "4");
    CHECK(s.pair.rejected == "5!");
  }
  SECTION("a chat completion line: the side equals the pair side of the same answer") {
    const std::string line =
        R"({"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},)"
        R"( {"role": "assistant", "content": "Hey"}, {"role": "user", "content": "2+2?"}],)"
        R"( "completion": [{"role": "assistant", "content": "5!"}]})";
    const ScoredLine s = parse_scored_line(line, "s.jsonl line 2");
    REQUIRE(s.completion);
    CHECK(s.pair.chosen == "5!");
    check_side(render_preference_side(tok, s.pair, s.pair.chosen, 64), chat_side("5!"));
    // cut at T+1 as a pair side is
    check_side(render_preference_side(tok, s.pair, s.pair.chosen, 50), chat_side("5!").first(51));
  }
  SECTION("a text completion line: encode(prompt), encode(completion), <|endoftext|>") {
    const ScoredLine s = parse_scored_line(R"({"prompt": "ab", "completion": "c"})", "w");
    REQUIRE(s.completion);
    REQUIRE(s.pair.is_text);
    Expect e;
    e.text("ab", 0).text("c", 1).id(kEot, 1);
    check_side(render_preference_side(tok, s.pair, s.pair.chosen, 8), e);
  }
  SECTION("bad lines name the line and the field") {
    const auto err = [](const std::string& l) {
      return error_of([&] { parse_scored_line(l, "s.jsonl line 4"); });
    };
    CHECK(err(R"({"prompt": "a"})") ==
          "s.jsonl line 4: no \"completion\" and no \"chosen\" / \"rejected\" (a line to score is "
          "{\"prompt\", \"completion\"} or a pair {\"prompt\", \"chosen\", \"rejected\"})");
    CHECK(err(R"({"completion": "a"})") ==
          "s.jsonl line 4: \"prompt\": missing (a completion line has \"prompt\" and "
          "\"completion\")");
    CHECK(err(R"({"prompt": "a", "completion": ""})") ==
          "s.jsonl line 4: \"completion\": an empty string (a side needs a non-empty completion)");
    CHECK(err(R"({"prompt": [{"role": "user", "content": "q"}], "completion": "a"})") ==
          "s.jsonl line 4: \"completion\": expected a list of messages with one assistant message "
          "(got a string; \"prompt\" is a list of messages)");
    CHECK(err(R"({"prompt": "a", "completion": "b", "chosen": "c"})") ==
          "s.jsonl line 4: \"completion\" beside \"chosen\" / \"rejected\" (a line to score is a "
          "pair or a prompt with one completion)");
    CHECK(err(R"({"prompt": "a", "chosen": "b"})") ==
          "s.jsonl line 4: \"rejected\": missing (a pair line has \"prompt\", \"chosen\" and "
          "\"rejected\")");
  }
}
