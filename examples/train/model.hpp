#pragma once
// Two small networks written for the example, in plain C++: an MLP and a
// CNN, with forward and backward passes over a mini-batch. Parameters and
// their gradients each live in one flat buffer (layer after layer, as
// frameworks lay them out), so gradient buckets reduce them in place. The
// backward pass reports each gradient the moment it is complete, last layer
// first, which is when a data-parallel trainer hands it to ddl.
//
// Kernels are written so the compiler vectorises them without -ffast-math:
// inner loops are axpy (y += a x) or dot products with eight explicit partial
// sums, always combined in the same order, so a run is deterministic.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ddl/shm/shared_buffer.hpp>

namespace train {

inline void axpy(float a, const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}
inline float dot(const float* a, const float* b, std::size_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// splitmix64: a reproducible generator for weights and shuffles.
class rng {
 public:
  explicit rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) / 16777216.0f; }

 private:
  std::uint64_t s_;
};

/// One parameter tensor: its place in the flat buffers.
struct param {
  std::string name;
  std::size_t offset, size;
};

class network;

/// A layer maps `in_size` floats per sample to `out_size`.
class layer {
 public:
  virtual ~layer() = default;
  std::size_t in_size = 0, out_size = 0;
  std::vector<std::size_t> params;  ///< indices into network::layout, forward order
  virtual void forward(network& net, const float* in, float* out, int batch) = 0;
  /// Adds this layer's parameter gradients; writes `din` unless it is null.
  virtual void backward(network& net, const float* in, const float* out, const float* dout, float* din, int batch) = 0;
};

/// A sequence of layers ending in softmax cross-entropy over 10 classes.
class network {
 public:
  std::vector<float> params;  ///< flat; `layout` says where each tensor lies
  /// Flat like `params`, in shared memory: MPI ranks of one machine read
  /// each other's gradients where they lie (`ddl::shared_buffer`).
  std::vector<float, ddl::shared_allocator<float>> grads;
  std::vector<param> layout;         ///< forward order
  std::string name;

  std::size_t add_param(const std::string& n, std::size_t size) {
    layout.push_back({n, total_, size});
    total_ += size;
    return layout.size() - 1;
  }
  float* p(std::size_t k) { return params.data() + layout[k].offset; }
  float* g(std::size_t k) { return grads.data() + layout[k].offset; }

  template <class L, class... A>
  void add(A&&... a) {
    layers_.push_back(std::make_unique<L>(*this, std::forward<A>(a)...));
  }
  /// Allocates the buffers and draws weights and biases uniformly from
  /// +-1/sqrt(fan_in), PyTorch's default for linear and convolution layers
  /// (He-uniform, sqrt(6/fan_in), trained the CNN visibly slower here).
  void finish(std::uint64_t seed) {
    params.assign(total_, 0.0f);
    grads.assign(total_, 0.0f);
    rng r(seed);
    for (const auto& l : layers_) {
      const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in(*l)));
      for (std::size_t k : l->params)
        for (std::size_t i = 0; i < layout[k].size; ++i) p(k)[i] = r.uniform(-bound, bound);
    }
  }

  /// Forward and backward over `batch` samples; the gradient of the mean
  /// loss times `batch / global_batch` is added to `grads` (so averaging
  /// over equal shards gives the global batch's gradient). `ready(k)` is
  /// called for each parameter tensor k as soon as its gradient is complete,
  /// last layer first. Returns the summed loss over the batch.
  double train_batch(const float* x, const std::uint8_t* y, int batch, const std::function<void(std::size_t)>& ready) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    const float* in = forward(x, batch);
    std::vector<float>& logits_grad = dbuf_[layers_.size()];
    logits_grad.resize(static_cast<std::size_t>(batch) * 10);
    double loss = 0;
    for (int b = 0; b < batch; ++b) {
      const float* z = in + b * 10;
      const float m = *std::max_element(z, z + 10);
      float e[10], sum = 0;
      for (int c = 0; c < 10; ++c) sum += e[c] = std::exp(z[c] - m);
      loss += -(z[y[b]] - m - std::log(sum));
      for (int c = 0; c < 10; ++c)
        logits_grad[b * 10 + c] = (e[c] / sum - (c == y[b] ? 1.0f : 0.0f)) / static_cast<float>(batch);
    }
    for (std::size_t i = layers_.size(); i-- > 0;) {
      layer& l = *layers_[i];
      dbuf_[i].resize(static_cast<std::size_t>(batch) * l.in_size);
      l.backward(*this, acts_[i], acts_[i + 1], dbuf_[i + 1].data(), i ? dbuf_[i].data() : nullptr, batch);
      for (std::size_t k = l.params.size(); k-- > 0;) ready(l.params[k]);
    }
    return loss;
  }

  /// How many of `batch` samples the network classifies right.
  int correct(const float* x, const std::uint8_t* y, int batch) {
    const float* z = forward(x, batch);
    int ok = 0;
    for (int b = 0; b < batch; ++b) ok += std::max_element(z + b * 10, z + b * 10 + 10) - (z + b * 10) == y[b];
    return ok;
  }

 private:
  const float* forward(const float* x, int batch) {
    abuf_.resize(layers_.size() + 1);
    dbuf_.resize(layers_.size() + 1);
    acts_.assign(layers_.size() + 1, nullptr);
    acts_[0] = x;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      abuf_[i + 1].resize(static_cast<std::size_t>(batch) * layers_[i]->out_size);
      layers_[i]->forward(*this, acts_[i], abuf_[i + 1].data(), batch);
      acts_[i + 1] = abuf_[i + 1].data();
    }
    return acts_.back();
  }
  std::size_t fan_in(const layer& l) const;

  std::size_t total_ = 0;
  std::vector<std::unique_ptr<layer>> layers_;
  std::vector<std::vector<float>> abuf_, dbuf_;
  std::vector<const float*> acts_;
  friend class dense;
  friend class conv3x3;
};

/// y = W^T x + b, W stored [in][out].
class dense : public layer {
 public:
  dense(network& net, std::size_t in, std::size_t out, const std::string& n) {
    in_size = in, out_size = out;
    params = {net.add_param(n + ".weight", in * out), net.add_param(n + ".bias", out)};
  }
  void forward(network& net, const float* in, float* out, int batch) override {
    const float* W = net.p(params[0]);
    const float* bias = net.p(params[1]);
    for (int b = 0; b < batch; ++b) {
      float* o = out + b * out_size;
      std::copy(bias, bias + out_size, o);
      for (std::size_t k = 0; k < in_size; ++k) axpy(in[b * in_size + k], W + k * out_size, o, out_size);
    }
  }
  void backward(network& net, const float* in, const float*, const float* dout, float* din, int batch) override {
    const float* W = net.p(params[0]);
    float* dW = net.g(params[0]);
    float* db = net.g(params[1]);
    for (int b = 0; b < batch; ++b) {
      const float* d = dout + b * out_size;
      for (std::size_t j = 0; j < out_size; ++j) db[j] += d[j];
      for (std::size_t k = 0; k < in_size; ++k) axpy(in[b * in_size + k], d, dW + k * out_size, out_size);
      if (din)
        for (std::size_t k = 0; k < in_size; ++k) din[b * in_size + k] = dot(d, W + k * out_size, out_size);
    }
  }
};

class relu : public layer {
 public:
  relu(network&, std::size_t n) { in_size = out_size = n; }
  void forward(network&, const float* in, float* out, int batch) override {
    for (std::size_t i = 0; i < static_cast<std::size_t>(batch) * in_size; ++i) out[i] = in[i] > 0 ? in[i] : 0.0f;
  }
  void backward(network&, const float*, const float* out, const float* dout, float* din, int batch) override {
    if (!din) return;
    for (std::size_t i = 0; i < static_cast<std::size_t>(batch) * in_size; ++i) din[i] = out[i] > 0 ? dout[i] : 0.0f;
  }
};

/// 3x3 convolution, padding 1, stride 1: C x H x W -> F x H x W, through
/// im2col (cached per batch for the backward pass).
class conv3x3 : public layer {
 public:
  conv3x3(network& net, int c, int f, int h, int w, const std::string& n) : C_(c), F_(f), H_(h), W_(w) {
    in_size = static_cast<std::size_t>(c) * h * w;
    out_size = static_cast<std::size_t>(f) * h * w;
    params = {net.add_param(n + ".weight", static_cast<std::size_t>(f) * c * 9), net.add_param(n + ".bias", f)};
  }
  std::size_t fan_in() const { return static_cast<std::size_t>(C_) * 9; }
  void forward(network& net, const float* in, float* out, int batch) override {
    const std::size_t hw = static_cast<std::size_t>(H_) * W_, K = static_cast<std::size_t>(C_) * 9;
    col_.resize(static_cast<std::size_t>(batch) * K * hw);
    const float* Wt = net.p(params[0]);
    const float* bias = net.p(params[1]);
    for (int b = 0; b < batch; ++b) {
      float* col = col_.data() + b * K * hw;
      im2col(in + b * in_size, col);
      float* o = out + b * out_size;
      for (int f = 0; f < F_; ++f) {
        std::fill(o + f * hw, o + (f + 1) * hw, bias[f]);
        for (std::size_t k = 0; k < K; ++k) axpy(Wt[f * K + k], col + k * hw, o + f * hw, hw);
      }
    }
  }
  void backward(network& net, const float*, const float*, const float* dout, float* din, int batch) override {
    const std::size_t hw = static_cast<std::size_t>(H_) * W_, K = static_cast<std::size_t>(C_) * 9;
    const float* Wt = net.p(params[0]);
    float* dW = net.g(params[0]);
    float* db = net.g(params[1]);
    dcol_.resize(K * hw);
    for (int b = 0; b < batch; ++b) {
      const float* col = col_.data() + b * K * hw;
      const float* d = dout + b * out_size;
      for (int f = 0; f < F_; ++f) {
        float s = 0;
        for (std::size_t i = 0; i < hw; ++i) s += d[f * hw + i];
        db[f] += s;
        for (std::size_t k = 0; k < K; ++k) dW[f * K + k] += dot(d + f * hw, col + k * hw, hw);
      }
      if (!din) continue;
      std::fill(dcol_.begin(), dcol_.end(), 0.0f);
      for (int f = 0; f < F_; ++f)
        for (std::size_t k = 0; k < K; ++k) axpy(Wt[f * K + k], d + f * hw, dcol_.data() + k * hw, hw);
      col2im(dcol_.data(), din + b * in_size);
    }
  }

 private:
  // col[(c*9 + ky*3 + kx)][y*W + x] = in[c][y+ky-1][x+kx-1] (0 outside)
  void im2col(const float* in, float* col) const {
    for (int c = 0; c < C_; ++c)
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          float* row = col + (static_cast<std::size_t>(c) * 9 + ky * 3 + kx) * H_ * W_;
          for (int y = 0; y < H_; ++y) {
            const int sy = y + ky - 1;
            for (int x = 0; x < W_; ++x) {
              const int sx = x + kx - 1;
              row[y * W_ + x] = sy >= 0 && sy < H_ && sx >= 0 && sx < W_ ? in[(c * H_ + sy) * W_ + sx] : 0.0f;
            }
          }
        }
  }
  void col2im(const float* col, float* din) const {
    std::fill(din, din + in_size, 0.0f);
    for (int c = 0; c < C_; ++c)
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          const float* row = col + (static_cast<std::size_t>(c) * 9 + ky * 3 + kx) * H_ * W_;
          for (int y = 0; y < H_; ++y) {
            const int sy = y + ky - 1;
            if (sy < 0 || sy >= H_) continue;
            for (int x = 0; x < W_; ++x) {
              const int sx = x + kx - 1;
              if (sx >= 0 && sx < W_) din[(c * H_ + sy) * W_ + sx] += row[y * W_ + x];
            }
          }
        }
  }
  int C_, F_, H_, W_;
  std::vector<float> col_, dcol_;
};

/// 2x2 max pooling, stride 2: C x H x W -> C x H/2 x W/2.
class maxpool2 : public layer {
 public:
  maxpool2(network&, int c, int h, int w) : C_(c), H_(h), W_(w) {
    in_size = static_cast<std::size_t>(c) * h * w;
    out_size = static_cast<std::size_t>(c) * (h / 2) * (w / 2);
  }
  void forward(network&, const float* in, float* out, int batch) override {
    arg_.resize(static_cast<std::size_t>(batch) * out_size);
    const int oh = H_ / 2, ow = W_ / 2;
    for (int b = 0; b < batch; ++b)
      for (int c = 0; c < C_; ++c)
        for (int y = 0; y < oh; ++y)
          for (int x = 0; x < ow; ++x) {
            const float* base = in + b * in_size + (static_cast<std::size_t>(c) * H_ + 2 * y) * W_ + 2 * x;
            int best = 0;
            const int off[4] = {0, 1, W_, W_ + 1};
            for (int q = 1; q < 4; ++q)
              if (base[off[q]] > base[off[best]]) best = q;
            const std::size_t o = b * out_size + (static_cast<std::size_t>(c) * oh + y) * ow + x;
            out[o] = base[off[best]];
            arg_[o] = static_cast<std::uint32_t>((base + off[best]) - (in + b * in_size));
          }
  }
  void backward(network&, const float*, const float*, const float* dout, float* din, int batch) override {
    if (!din) return;
    std::fill(din, din + static_cast<std::size_t>(batch) * in_size, 0.0f);
    for (int b = 0; b < batch; ++b)
      for (std::size_t o = 0; o < out_size; ++o) din[b * in_size + arg_[b * out_size + o]] += dout[b * out_size + o];
  }

 private:
  int C_, H_, W_;
  std::vector<std::uint32_t> arg_;
};

inline std::size_t network::fan_in(const layer& l) const {
  if (auto* c = dynamic_cast<const conv3x3*>(&l)) return c->fan_in();
  return l.in_size;
}

/// 784 -> 256 -> 128 -> 10, ReLU.
inline std::unique_ptr<network> make_mlp(std::uint64_t seed) {
  auto n = std::make_unique<network>();
  n->name = "mlp";
  n->add<dense>(784, 256, "fc1");
  n->add<relu>(256);
  n->add<dense>(256, 128, "fc2");
  n->add<relu>(128);
  n->add<dense>(128, 10, "fc3");
  n->finish(seed);
  return n;
}

/// conv 3x3 (1 -> 16) ReLU, pool -> conv 3x3 (16 -> 32) ReLU, pool -> 1568 -> 10.
inline std::unique_ptr<network> make_cnn(std::uint64_t seed) {
  auto n = std::make_unique<network>();
  n->name = "cnn";
  n->add<conv3x3>(1, 16, 28, 28, "conv1");
  n->add<relu>(16 * 28 * 28);
  n->add<maxpool2>(16, 28, 28);
  n->add<conv3x3>(16, 32, 14, 14, "conv2");
  n->add<relu>(32 * 14 * 14);
  n->add<maxpool2>(32, 14, 14);
  n->add<dense>(32 * 7 * 7, 10, "fc");
  n->finish(seed);
  return n;
}

}  // namespace train
