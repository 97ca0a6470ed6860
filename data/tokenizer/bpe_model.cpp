// BpeModel: vocabulary checks, the merge table, and the two merge loops: an
// in-place scan for short pieces (almost all of them) and a heap over a linked
// list for long ones, so a megabyte of unbroken text stays O(n log n).
#include "data/tokenizer/bpe_model.h"

#include <queue>

#include "core/error.h"

namespace ember::data {

BpeModel::BpeModel(std::vector<std::string> tokens, std::vector<BpeMerge> merges,
                   BpeOptions options)
    : tokens_(std::move(tokens)),
      merges_(std::move(merges)),
      merge_table_(merges_.size()),
      lookup_(tokens_.size()),
      options_(options) {
  EMBER_CHECK(tokens_.size() < UINT32_MAX, "BPE vocabulary too large: ", tokens_.size());
  for (uint32_t id = 0; id < tokens_.size(); ++id) {
    EMBER_CHECK(!tokens_[id].empty(), "BPE vocabulary: token ", id, " is empty");
    lookup_.insert(tokens_[id], hash_bytes(tokens_[id]), id);  // keeps the lowest id
  }
  EMBER_CHECK(!options_.unk || *options_.unk < tokens_.size(), "BPE unk token id ", *options_.unk,
              " is outside the vocabulary");
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const uint32_t* id = lookup_.find(byte, hash_bytes(byte));
    byte_ids_[b] = id ? *id : kNoToken;
    all_bytes_ = all_bytes_ && id;
  }
  for (uint32_t rank = 0; rank < merges_.size(); ++rank) {
    const BpeMerge& m = merges_[rank];
    const size_t n = tokens_.size();
    EMBER_CHECK(m.left < n && m.right < n && m.result < n, "BPE merge ", rank,
                " names a token id outside the vocabulary of ", n);
    EMBER_CHECK(tokens_[m.result] == tokens_[m.left] + tokens_[m.right], "BPE merge ", rank,
                ": token ", m.result, " does not spell token ", m.left, " + token ", m.right);
    merge_table_.insert(pair_key(m.left, m.right), MergeInfo{rank, m.result});  // first rank wins
  }
}

std::optional<uint32_t> BpeModel::find_token(std::string_view bytes) const {
  const uint32_t* id = lookup_.find(bytes, hash_bytes(bytes));
  if (!id) return std::nullopt;
  return *id;
}

size_t BpeModel::initial_ids(const uint8_t* p, size_t n, uint32_t* ids) const {
  size_t m = 0;
  if (all_bytes_) {
    for (size_t i = 0; i < n; ++i) ids[i] = byte_ids_[p[i]];
    return n;
  }
  bool last_unk = false;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t id = byte_ids_[p[i]];
    if (id != kNoToken) {
      ids[m++] = id;
      last_unk = false;
    } else if (options_.unk && !(options_.fuse_unk && last_unk)) {
      ids[m++] = *options_.unk;
      last_unk = true;
    }
  }
  return m;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  const auto* p = reinterpret_cast<const uint8_t*>(piece.data());
  const size_t n = piece.size();
  if (options_.ignore_merges) {
    if (auto id = find_token(piece)) {
      out.push_back(*id);
      return;
    }
  }
  if (n <= 256) {
    uint32_t ids[256];
    merge_short(ids, initial_ids(p, n, ids), out);
  } else {
    std::vector<uint32_t> ids(n);
    ids.resize(initial_ids(p, n, ids.data()));
    merge_long(ids.data(), ids.size(), out);
  }
}

// ranks[i] is the rank of the pair (ids[i], ids[i + 1]); each step merges the
// leftmost lowest rank and refreshes only the two neighbouring ranks.
void BpeModel::merge_short(uint32_t* ids, size_t n, std::vector<uint32_t>& out) const {
  uint32_t ranks[256], results[256];
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = rank_of(ids[i], ids[i + 1], &results[i]);
  size_t m = n;
  while (m > 1) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < m; ++i)
      if (ranks[i] < best) {
        best = ranks[i];
        at = i;
      }
    if (best == kNoRank) break;
    ids[at] = results[at];
    for (size_t i = at + 1; i + 1 < m; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      results[i] = results[i + 1];
    }
    --m;
    if (at + 1 < m) ranks[at] = rank_of(ids[at], ids[at + 1], &results[at]);
    if (at > 0) ranks[at - 1] = rank_of(ids[at - 1], ids[at], &results[at - 1]);
  }
  out.insert(out.end(), ids, ids + m);
}

// The same order of merges with a min-heap of (rank, left position): an entry
// is stale when its left node died or its pair no longer has that rank.
void BpeModel::merge_long(const uint32_t* ids, size_t n, std::vector<uint32_t>& out) const {
  if (n == 0) return;
  struct Node {
    uint32_t id;
    int64_t prev, next;  // -1 at the ends
    bool alive;
  };
  struct Entry {
    uint32_t rank;
    int64_t left;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<Node> nodes(n);
  for (size_t i = 0; i < n; ++i)
    nodes[i] = Node{ids[i], static_cast<int64_t>(i) - 1,
                    i + 1 < n ? static_cast<int64_t>(i + 1) : -1, true};
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  uint32_t result = 0;
  auto push = [&](int64_t left) {
    if (left < 0 || nodes[left].next < 0) return;
    const uint32_t r = rank_of(nodes[left].id, nodes[nodes[left].next].id, &result);
    if (r != kNoRank) heap.push(Entry{r, left});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int64_t>(i));
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    Node& left = nodes[e.left];
    if (!left.alive || left.next < 0) continue;
    Node& right = nodes[left.next];
    if (rank_of(left.id, right.id, &result) != e.rank) continue;
    left.id = result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) nodes[right.next].prev = e.left;
    push(left.prev);
    push(e.left);
  }
  for (int64_t i = 0; i >= 0; i = nodes[i].next) out.push_back(nodes[i].id);
}

}  // namespace ember::data
