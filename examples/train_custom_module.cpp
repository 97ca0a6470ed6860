// A model of your own and a hand-written training loop, PyTorch-style: a
// character-level MLP reads two bytes of a short text and predicts the next.
// Prints the loss, which falls; exits non-zero if it did not halve.
#include <cstdio>
#include <string>

#include "ember/ember.h"

using namespace ember;

class CharMLP : public nn::Module {
 public:
  CharMLP(int64_t context, int64_t dim, int64_t hidden, Generator& gen)
      : embed_(register_module("embed", std::make_shared<nn::Embedding>(256, dim, gen, 0.5))),
        hidden_(register_module(
            "hidden", std::make_shared<nn::Linear>(context * dim, hidden, true, gen, 0.2))),
        out_(register_module("out", std::make_shared<nn::Linear>(hidden, 256, false, gen, 0.05))),
        out_bias_(register_parameter("out_bias", Tensor::zeros({256}))) {}

  // ids [N, context] (int64) -> logits [N, 256]
  Variable forward(const Tensor& ids) const {
    const Variable e = reshape(embed_->forward(ids), {ids.size(0), -1});  // [N, context * dim]
    return out_->forward(tanh(hidden_->forward(e))) + out_bias_;
  }

 private:
  std::shared_ptr<nn::Embedding> embed_;
  std::shared_ptr<nn::Linear> hidden_, out_;
  Variable out_bias_;
};

int main() {
  const std::string text = "the quick brown fox jumps over the lazy dog; the lazy dog sleeps. ";
  std::vector<int64_t> x, y;  // every (two bytes -> next byte) of the text
  for (size_t i = 0; i + 2 < text.size(); ++i) {
    x.insert(x.end(),
             {static_cast<unsigned char>(text[i]), static_cast<unsigned char>(text[i + 1])});
    y.push_back(static_cast<unsigned char>(text[i + 2]));
  }
  const int64_t n = static_cast<int64_t>(y.size());
  const Tensor inputs = Tensor::from_vector(x, {n, 2}), targets = Tensor::from_vector(y, {n});

  Generator gen(1234);
  CharMLP model(/*context=*/2, /*dim=*/16, /*hidden=*/64, gen);
  optim::AdamW opt(optim::decay_groups(model.named_parameters(), /*weight_decay=*/0.01));
  double first = 0, last = 0;
  for (int step = 1; step <= 150; ++step) {
    opt.zero_grad();
    const CrossEntropyResult loss = cross_entropy(model.forward(inputs), targets);
    loss.loss.backward();
    optim::clip_grad_norm(model.parameters(), /*max_norm=*/1.0);
    opt.step(/*lr=*/1e-2);
    if (step == 1) first = loss.ce;
    last = loss.ce;
    if (step == 1 || step % 25 == 0) std::printf("step %3d  loss %.4f\n", step, loss.ce);
  }
  return last < 0.5 * first ? 0 : 1;
}
