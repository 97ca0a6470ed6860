// gradient_buckets (autograd/gradient_buckets.h): one walk over the
// parameters from the last, cutting by bytes or by unit.
#include "autograd/gradient_buckets.h"

#include "core/error.h"

namespace ember {

std::vector<std::vector<size_t>> gradient_buckets(const std::vector<int64_t>& numels,
                                                  int64_t element_bytes,
                                                  int64_t first_bucket_bytes, int64_t bucket_bytes,
                                                  const std::vector<int64_t>& units) {
  EMBER_CHECK(units.empty() || units.size() == numels.size(), "gradient_buckets: ", units.size(),
              " units for ", numels.size(), " parameters; give one per parameter or none");
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;  // elements in the last bucket
  for (size_t k = numels.size(); k-- > 0;) {
    bool cut = buckets.empty();
    if (!cut) {  // parameter k + 1 is the last one taken
      const int64_t cap = buckets.size() == 1 ? first_bucket_bytes : bucket_bytes;
      cut = units.empty() ? (filled + numels[k]) * element_bytes > cap : units[k] != units[k + 1];
    }
    if (cut) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(k);
    filled += numels[k];
  }
  return buckets;
}

}  // namespace ember
