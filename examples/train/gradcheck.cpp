// The hand-written backward passes of examples/train/model.hpp against
// central finite differences along each tensor's gradient, for both
// networks, on a few random samples.
#include <cmath>
#include <cstdio>
#include <vector>

#include "model.hpp"

namespace {
int check(train::network& net, const char* name) {
  const int batch = 3;
  train::rng r(7);
  std::vector<float> x(static_cast<std::size_t>(batch) * 784);
  for (float& v : x) v = r.uniform(-1, 1);
  const std::uint8_t y[batch] = {3, 7, 1};
  net.train_batch(x.data(), y, batch, [](std::size_t) {});
  const std::vector<float> analytic(net.grads.begin(), net.grads.end());
  // Per tensor, along its own gradient g: (L(p + e g) - L(p - e g)) / 2e must
  // be |g|^2. One direction through every element of the tensor averages out
  // the kinks of ReLU and max-pooling that spoil element-wise differences.
  int bad = 0, checked = 0;
  for (std::size_t k = 0; k < net.layout.size(); ++k) {
    const auto& p = net.layout[k];
    double norm2 = 0;
    for (std::size_t i = 0; i < p.size; ++i) norm2 += double(analytic[p.offset + i]) * analytic[p.offset + i];
    if (norm2 == 0) continue;
    const double e = 2e-3 / std::sqrt(norm2);
    auto loss_at = [&](double step) {
      std::vector<float> keep(net.params.begin() + static_cast<std::ptrdiff_t>(p.offset),
                              net.params.begin() + static_cast<std::ptrdiff_t>(p.offset + p.size));
      for (std::size_t i = 0; i < p.size; ++i)
        net.params[p.offset + i] = static_cast<float>(keep[i] + step * analytic[p.offset + i]);
      const double l = net.train_batch(x.data(), y, batch, [](std::size_t) {}) / batch;
      std::copy(keep.begin(), keep.end(), net.params.begin() + static_cast<std::ptrdiff_t>(p.offset));
      return l;
    };
    const double numeric = (loss_at(e) - loss_at(-e)) / (2 * e);
    const double err = std::abs(numeric - norm2) / norm2;
    ++checked;
    std::printf("%s %-14s |g|^2 %.6g  finite difference %.6g  (%.2f%%)\n", name, p.name.c_str(), norm2, numeric,
                100 * err);
    if (err > 0.02) ++bad;
  }
  std::printf("%s: %d of %d tensors off by more than 2%%\n", name, bad, checked);
  return bad;
}
}  // namespace

int main() {
  auto mlp = train::make_mlp(3);
  auto cnn = train::make_cnn(3);
  const int bad = check(*mlp, "mlp") + check(*cnn, "cnn");
  std::printf("gradient check: %s\n", bad ? "FAILED" : "ok");
  return bad ? 1 : 0;
}
