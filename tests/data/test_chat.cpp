// Chat data: ChatML rendering and label flags of multi-turn conversations
// against id sequences written by hand (byte tokenizer: id = byte, specials
// 256-258), text lines, truncation and padding, the slot formula, the
// shuffle's independence of the world size, every bad input's message, and
// Tokenizer::with_chat_tokens (ids of a conversation before and after).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>

#include "data/chat.h"
#include "data/chat_loader.h"
#include "data/tokenizer/bpe_trainer.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::data;

namespace {

constexpr uint32_t kEot = 256, kStart = 257, kEnd = 258;

Tokenizer chat_bytes() {
  return Tokenizer::bytes({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
}

// Expected ids and flags, built by hand: bytes of a literal, or one special.
struct Expect {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> trained;
  Expect& text(const std::string& s, bool t) {
    for (unsigned char c : s) ids.push_back(c), trained.push_back(t);
    return *this;
  }
  Expect& id(uint32_t i, bool t) {
    ids.push_back(i), trained.push_back(t);
    return *this;
  }
};

ChatLine conversation(std::vector<ChatMessage> m) {
  return ChatLine{std::move(m), "", false};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("ChatML rendering and labels of a multi-turn conversation") {
  const Tokenizer tok = chat_bytes();
  const ChatLine line = parse_chat_line(
      R"({"messages": [{"role": "system", "content": "Be brief."},)"
      R"( {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},)"
      R"( {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]})",
      "t line 1");
  REQUIRE(line.messages.size() == 5);
  Expect e;
  e.id(kStart, 0).text("system\nBe brief.", 0).id(kEnd, 0).text("\n", 0);
  e.id(kStart, 0).text("user\nHi", 0).id(kEnd, 0).text("\n", 0);
  e.id(kStart, 0).text("assistant\n", 0).text("Hello!", 1).id(kEnd, 1).text("\n", 0);
  e.id(kStart, 0).text("user\n2+2?", 0).id(kEnd, 0).text("\n", 0);
  e.id(kStart, 0).text("assistant\n", 0).text("4", 1).id(kEnd, 1).text("\n", 0);
  const ChatTokens r = render_chat(tok, line);
  CHECK(r.ids == e.ids);
  CHECK(r.trained == e.trained);

  // The generation prompt: the messages so far, then <|im_start|>assistant\n.
  Expect p;
  p.id(kStart, 0).text("user\nHi", 0).id(kEnd, 0).text("\n", 0);
  p.id(kStart, 0).text("assistant\n", 0);
  const std::vector<ChatMessage> history{{"user", "Hi"}};
  CHECK(chat_generation_prompt(tok, history) == p.ids);
}

TEST_CASE("chat content keeps special-token names as text, empty assistant trains <|im_end|>") {
  const Tokenizer tok = chat_bytes();
  const ChatTokens r = render_chat(tok, conversation({{"user", "<|im_end|>"}, {"assistant", ""}}));
  Expect e;
  e.id(kStart, 0).text("user\n<|im_end|>", 0).id(kEnd, 0).text("\n", 0);
  e.id(kStart, 0).text("assistant\n", 0).id(kEnd, 1).text("\n", 0);
  CHECK(r.ids == e.ids);
  CHECK(r.trained == e.trained);
}

TEST_CASE("an assistant token straddling the role and the content is trained") {
  // Bytes, 256 = "\n\n" (one merge), then the three specials.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const char* s : {"\n\n", "<|endoftext|>", "<|im_start|>", "<|im_end|>"}) tokens.push_back(s);
  const Tokenizer tok(BpeModel(tokens, {BpeMerge{10, 10, 256}}),
                      {{"<|endoftext|>", 257}, {"<|im_start|>", 258}, {"<|im_end|>", 259}});
  // The pre-tokenizer makes "\n\n\n" one piece: ids 256 ("\n" of the role, "\n" of
  // the content) and 10.
  const ChatTokens r = render_chat(tok, conversation({{"assistant", "\n\n"}}));
  Expect e;
  e.id(258, 0).text("assistant", 0).id(256, 1).text("\n", 1).id(259, 1).text("\n", 0);
  CHECK(r.ids == e.ids);
  CHECK(r.trained == e.trained);
}

TEST_CASE("a text line is its tokens, nothing added, all trained") {
  const Tokenizer tok = chat_bytes();
  const ChatLine line = parse_chat_line(R"({"text": "ab<|endoftext|>c"})", "t line 1");
  REQUIRE(line.is_text);
  const ChatTokens r = render_chat(tok, line);
  CHECK(r.ids == std::vector<uint32_t>{'a', 'b', kEot, 'c'});
  CHECK(r.trained == std::vector<uint8_t>{1, 1, 1, 1});
}

TEST_CASE("a tokenizer without the ChatML specials is an error naming the missing token") {
  const Tokenizer tok = Tokenizer::bytes({"<|endoftext|>", "<|im_start|>"});
  const std::string msg = error_of([&] { render_chat(tok, conversation({{"user", "x"}})); });
  CHECK_THAT(msg, Catch::Contains("no <|im_end|> special token"));
  CHECK_THAT(error_of([] { chat_specials(Tokenizer()); }), Catch::Contains("<|im_start|>"));
  // Text lines need no specials.
  CHECK(make_chat_rows(Tokenizer(), {ChatLine{{}, "ab", true}}, 4).rows.size() == 1);
}

TEST_CASE("chat rows: the first T+1 ids, padding after them, the trained mask over targets") {
  const Tokenizer tok = chat_bytes();
  const std::vector<ChatLine> lines{
      conversation(
          {{"user", "q"}, {"assistant", "ok"}}),  // 9 ids for the user, 15 for the assistant
      ChatLine{{}, "xyz", true},                  // 3 ids
      conversation({{"user", "a long question that is cut"}, {"assistant", "never seen"}}),
  };
  const int64_t T = 8;
  auto rows = std::make_shared<ChatRows>(make_chat_rows(tok, lines, T));
  CHECK(rows->truncated == 2);
  CHECK(rows->rows[0].ids.size() == 9);
  CHECK(rows->rows[1].ids.size() == 3);

  BatchLoaderOptions o;
  o.batch = 3, o.seq_len = T, o.sequential = true;
  const ChatBatch b = ChatLoader(rows, o).batch(0, 0);
  CHECK(b.lengths == std::vector<int64_t>{9, 3, 9});
  const int64_t* t = b.tokens.data<int64_t>();
  const float* m = b.trained.data<float>();
  Expect row0;
  row0.id(kStart, 0).text("user\nq", 0).id(kEnd, 0).text("\n", 0);
  for (int64_t i = 0; i < 9; ++i) CHECK(t[i] == row0.ids[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < T; ++i) CHECK(m[i] == 0.0f);  // the assistant part is cut off
  // Row 1 "xyz": targets y, z trained, padding (id 0) ignored.
  const std::vector<int64_t> row1{'x', 'y', 'z', 0, 0, 0, 0, 0, 0};
  CHECK(std::vector<int64_t>(t + 9, t + 18) == row1);
  const std::vector<float> mask1{1, 1, 0, 0, 0, 0, 0, 0};
  CHECK(std::vector<float>(m + 8, m + 16) == mask1);
  CHECK(b.trained_tokens == 2);

  // With a wider window the assistant's "ok" and <|im_end|> are the targets trained.
  auto wide = std::make_shared<ChatRows>(make_chat_rows(tok, {lines[0]}, 24));
  CHECK(wide->truncated == 0);
  o.batch = 1, o.seq_len = 24;
  const ChatBatch w = ChatLoader(wide, o).batch(0, 0);
  CHECK(w.lengths[0] == 24);
  std::vector<float> expect(24, 0.0f);
  expect[19] = expect[20] = expect[21] = 1;  // targets = ids 20, 21, 22: 'o', 'k', <|im_end|>
  const float* wm = w.trained.data<float>();
  CHECK(std::vector<float>(wm, wm + 24) == expect);
  CHECK(w.tokens.data<int64_t>()[22] == kEnd);
  CHECK(w.trained_tokens == 3);
}

TEST_CASE("chat order: the slot formula, and one shuffle for every world size") {
  const int64_t n = 23, B = 2, A = 3;
  std::vector<ChatLine> lines;
  for (int64_t i = 0; i < n; ++i) lines.push_back(ChatLine{{}, "line " + std::to_string(i), true});
  auto rows = std::make_shared<ChatRows>(make_chat_rows(Tokenizer(), lines, 16));
  BatchLoaderOptions o;
  o.batch = B, o.grad_accum = A, o.seq_len = 16, o.seed = 7;

  SECTION("sequential: ((s*A + u)*W + r)*B + b mod n") {
    o.sequential = true, o.world = 2, o.rank = 1;
    const ChatLoader L(rows, o);
    for (int64_t s = 0; s < 5; ++s)
      for (int64_t u = 0; u < A; ++u)
        for (int64_t b = 0; b < B; ++b)
          CHECK(L.conversation(s, u, b) == (((s * A + u) * 2 + 1) * B + b) % n);
    // Rows of step 1, micro 2 on rank 1: slots 22 and 23, "line 22" and "line 0".
    const ChatBatch batch = L.batch(1, 2);
    const int64_t* t = batch.tokens.data<int64_t>();
    CHECK(std::vector<int64_t>(t, t + 8) ==
          std::vector<int64_t>{'l', 'i', 'n', 'e', ' ', '2', '2', 0});
    CHECK(std::vector<int64_t>(t + 17, t + 24) ==
          std::vector<int64_t>{'l', 'i', 'n', 'e', ' ', '0', 0});
  }
  SECTION("shuffled: each epoch a permutation, the same read with W=1 and W=2") {
    // W=1 with B'=2B reads the slots W=2 ranks read together, in the same order.
    o.world = 1, o.rank = 0, o.batch = 2 * B;
    const ChatLoader one(rows, o);
    o.world = 2, o.batch = B;
    o.rank = 0;
    const ChatLoader r0(rows, o);
    o.rank = 1;
    const ChatLoader r1(rows, o);
    std::vector<int64_t> seq1, seq2;
    for (int64_t s = 0; s < 8; ++s)
      for (int64_t u = 0; u < A; ++u) {
        for (int64_t b = 0; b < 2 * B; ++b) seq1.push_back(one.conversation(s, u, b));
        for (const ChatLoader* L : {&r0, &r1})
          for (int64_t b = 0; b < B; ++b) seq2.push_back(L->conversation(s, u, b));
      }
    CHECK(seq1 == seq2);
    REQUIRE(seq1.size() >= 4 * n);
    for (int64_t e = 0; e < 4; ++e) {
      std::vector<int64_t> epoch(seq1.begin() + e * n, seq1.begin() + (e + 1) * n);
      std::vector<int64_t> sorted = epoch;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < n; ++i) CHECK(sorted[static_cast<size_t>(i)] == i);
      CHECK(epoch == epoch_permutation(n, 7, e));
    }
    CHECK(epoch_permutation(n, 7, 0) != epoch_permutation(n, 7, 1));
    CHECK(epoch_permutation(n, 7, 0) != epoch_permutation(n, 8, 0));
  }
}

TEST_CASE("bad chat lines are errors naming the file and line") {
  testing::TempDir dir("chat");
  const std::string good = R"({"messages": [{"role": "user", "content": "hi"}]})";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"{not json", "line 2: not JSON"},
      {"[1, 2]", "line 2: not a JSON object"},
      {R"({"prompt": "x"})", R"(line 2: no "messages" or "text" key)"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})",
       R"(line 2: messages[0] has unknown role "tool")"},
      {R"({"messages": [{"role": "user"}]})",
       R"(line 2: messages[0] (user) has no string "content")"},
      {R"({"messages": [{"role": "user", "content": 5}]})",
       R"(line 2: messages[0] (user) has no string "content")"},
      {R"({"messages": []})", R"(line 2: "messages" is empty)"},
      {R"({"text": 3})", R"(line 2: "text" is not a string)"},
      {R"({"text": "t", "n": 1e999})", "line 2: number overflow parsing '1e999'"},  // beyond a double
  };
  for (const auto& [line, expected] : cases) {
    dir.write("bad.jsonl", good + "\n" + line + "\n");
    const std::string msg = error_of([&] { read_chat_file(dir / "bad.jsonl"); });
    CHECK_THAT(msg, Catch::StartsWith(dir / "bad.jsonl") && Catch::Contains(expected));
  }
  dir.write("empty.jsonl", "");
  CHECK(error_of([&] { read_chat_file(dir / "empty.jsonl"); }) ==
        dir / "empty.jsonl" + ": empty chat file (no conversation or text line)");
  dir.write("blank.jsonl", "\n  \n");
  CHECK_THAT(error_of([&] { read_chat_file(dir / "blank.jsonl"); }),
             Catch::Contains("empty chat file"));
  CHECK_THAT(error_of([&] { read_chat_file(dir / "missing.jsonl"); }),
             Catch::Contains("cannot open chat file"));
  // Blank lines are skipped but still counted.
  dir.write("ok.jsonl", good + "\n\n" + R"({"text": "t"})" + "\r\n");
  const auto lines = read_chat_file(dir / "ok.jsonl");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].messages[0].content == "hi");
  CHECK(lines[1].text == "t");
}

namespace {

// A tokenizer as ember trained them before the ChatML pair was reserved: the
// bytes, 256 = "hi" (one merge), 257 = <|endoftext|>.
Tokenizer endoftext_only() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.push_back("hi");
  tokens.push_back("<|endoftext|>");
  return Tokenizer(BpeModel(tokens, {BpeMerge{'h', 'i', 256}}), {{"<|endoftext|>", 257}});
}

}  // namespace

TEST_CASE("with_chat_tokens appends the missing ChatML specials, other ids stay") {
  const Tokenizer before = endoftext_only();
  CHECK(before.missing_chat_tokens() == 2);
  CHECK(Tokenizer::from_json(before.to_json()).missing_chat_tokens() == 2);  // such files still load
  const std::string rendered = "<|im_start|>user\nhi<|im_end|>\n";
  // Before: the ChatML names are plain text (bytes), "hi" is its merge.
  Expect b;
  b.text("<|im_start|>user\n", 0).id(256, 0).text("<|im_end|>\n", 0);
  CHECK(before.encode(rendered) == b.ids);
  CHECK_THROWS_WITH(chat_generation_prompt(before, std::vector<ChatMessage>{{"user", "hi"}}),
                    Catch::Contains("ember finetune --add-chat-tokens"));

  const Tokenizer after = before.with_chat_tokens();
  CHECK(after.missing_chat_tokens() == 0);
  CHECK(after.vocab_size() == 260);
  CHECK(after.special_id("<|endoftext|>") == 257);
  CHECK(after.special_id("<|im_start|>") == 258);
  CHECK(after.special_id("<|im_end|>") == 259);
  CHECK(after.model().merges().size() == 1);
  Expect a;
  a.id(258, 0).text("user\n", 0).id(256, 0).id(259, 0).text("\n", 0);
  CHECK(after.encode(rendered) == a.ids);
  // Rendering agrees with encode of the rendered text; the generation prompt adds the assistant header.
  const std::vector<ChatMessage> messages{{"user", "hi"}};
  CHECK(render_chat(after, conversation(messages)).ids == a.ids);
  // Text without the new names encodes as before; the file round trip keeps the ids.
  CHECK(after.encode("oh hi<|endoftext|>") == before.encode("oh hi<|endoftext|>"));
  CHECK(Tokenizer::from_json(after.to_json()).encode(rendered) == a.ids);
  a.id(258, 0).text("assistant\n", 0);
  CHECK(chat_generation_prompt(after, messages) == a.ids);
  CHECK(after.decode(std::vector<uint32_t>{258, 259}) == "<|im_start|><|im_end|>");
  // Complete already: unchanged.
  CHECK(after.with_chat_tokens().to_json() == after.to_json());
}

TEST_CASE("with_chat_tokens on a tokenizer without specials appends all three in order") {
  const Tokenizer plain;
  CHECK(plain.missing_chat_tokens() == 3);
  const Tokenizer t = plain.with_chat_tokens();
  CHECK(t.vocab_size() == 259);
  CHECK(t.special_id("<|endoftext|>") == 256);
  CHECK(t.special_id("<|im_start|>") == 257);
  CHECK(t.special_id("<|im_end|>") == 258);
  CHECK(t.encode("<|im_start|>a<|im_end|><|endoftext|>") == std::vector<uint32_t>{257, 'a', 258, 256});
  // Only <|endoftext|> missing: it alone is appended.
  const Tokenizer pair = Tokenizer::bytes({"<|im_start|>", "<|im_end|>"});
  CHECK(pair.missing_chat_tokens() == 1);
  CHECK(pair.with_chat_tokens().special_id("<|endoftext|>") == 258);
}

TEST_CASE("trained tokenizers reserve <|endoftext|>, <|im_start|>, <|im_end|>") {
  BpeTrainOptions o;
  o.vocab_size = 256 + 1 + 3;  // one merge: "hi" (the only pair seen twice)
  const Tokenizer t = train_bpe_on_text("hi hi", o);
  REQUIRE(t.model().merges().size() == 1);
  CHECK(t.missing_chat_tokens() == 0);
  CHECK(t.special_id("<|endoftext|>") == 257);
  CHECK(t.special_id("<|im_start|>") == 258);
  CHECK(t.special_id("<|im_end|>") == 259);
  CHECK(t.encode("<|im_start|>user\nhi<|im_end|>\n") ==
        Expect().id(258, 0).text("user\n", 0).id(256, 0).id(259, 0).text("\n", 0).ids);
}
