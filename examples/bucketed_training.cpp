// The training-loop pattern with gradient buckets: a small two-layer network
// trained data-parallel on 4 ranks (threads). Gradients are registered once
// in the order the backward pass produces them; each is marked ready as soon
// as it is computed, so buckets reduce while the rest of the backward pass
// runs; wait_all() before the optimizer step. Every rank starts from rank 0's
// weights (broadcast) and ends with the same weights.
#include <ddl.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {
constexpr int ranks = 4, in = 32, hidden = 64, samples_per_rank = 32, steps = 200;

struct net {  // y = w2 . tanh(W1 x + b1) + b2
  std::vector<float> w1 = std::vector<float>(hidden * in), b1 = std::vector<float>(hidden),
                     w2 = std::vector<float>(hidden), b2 = std::vector<float>(1);
};

float target(const float* x) { return std::sin(x[0] + 0.5f * x[1]) - 0.3f * x[2]; }
}  // namespace

int main() {
  std::vector<std::vector<float>> final_w2(ranks);
  std::vector<float> first_loss(ranks), last_loss(ranks);

  ddl::local_fabric::run(ranks, [&](ddl::local_transport& t) {
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t);
    net p, g;  // parameters and their gradients
    // Random weights on every rank, then everyone takes rank 0's.
    for (std::size_t i = 0; i < p.w1.size(); ++i) p.w1[i] = std::sin(float(i * 7919 + t.rank())) * 0.3f;
    for (std::size_t i = 0; i < p.w2.size(); ++i) p.w2[i] = std::cos(float(i * 104729 + t.rank())) * 0.3f;
    for (std::vector<float>* v : {&p.w1, &p.b1, &p.w2, &p.b2}) comm.broadcast(ddl::host_view(*v), 0);

    // Backward order: the last layer's gradients come first.
    ddl::bucketer<decltype(comm)> buckets(comm, ddl::op::avg);
    const std::size_t gb2 = buckets.add(ddl::host_view(g.b2)), gw2 = buckets.add(ddl::host_view(g.w2)),
                      gb1 = buckets.add(ddl::host_view(g.b1)), gw1 = buckets.add(ddl::host_view(g.w1));

    std::vector<float> x(in), h(hidden);
    for (int step = 0; step < steps; ++step) {
      for (std::vector<float>* v : {&g.w1, &g.b1, &g.w2, &g.b2}) std::fill(v->begin(), v->end(), 0.0f);
      std::vector<float> dh_sum(hidden, 0.0f);
      float loss = 0;
      for (int s = 0; s < samples_per_rank; ++s) {  // this rank's shard of the global batch
        const int id = (step * ranks + t.rank()) * samples_per_rank + s;
        for (int j = 0; j < in; ++j) x[j] = std::sin(0.61f * float(id * in + j));
        float y = p.b2[0];
        for (int k = 0; k < hidden; ++k) {
          float a = p.b1[k];
          for (int j = 0; j < in; ++j) a += p.w1[k * in + j] * x[j];
          h[k] = std::tanh(a);
          y += p.w2[k] * h[k];
        }
        const float d = (y - target(x.data())) / samples_per_rank;  // d(loss)/dy, loss = mean of squares / 2
        loss += 0.5f * (y - target(x.data())) * (y - target(x.data())) / samples_per_rank;
        g.b2[0] += d;
        for (int k = 0; k < hidden; ++k) {
          g.w2[k] += d * h[k];
          const float dh = d * p.w2[k] * (1 - h[k] * h[k]);
          g.b1[k] += dh;
          for (int j = 0; j < in; ++j) g.w1[k * in + j] += dh * x[j];
        }
      }
      // The last layer's gradients are done first: hand them over at once.
      buckets.mark_ready(gb2);
      buckets.mark_ready(gw2);
      buckets.mark_ready(gb1);
      buckets.mark_ready(gw1);
      buckets.wait_all();  // every gradient now averaged over the ranks
      comm.all_reduce(ddl::host_view(&loss, 1), ddl::op::avg);
      if (step == 0) first_loss[t.rank()] = loss;
      last_loss[t.rank()] = loss;
      for (auto [w, dw] : {std::pair{&p.w1, &g.w1}, {&p.b1, &g.b1}, {&p.w2, &g.w2}, {&p.b2, &g.b2}})
        for (std::size_t i = 0; i < w->size(); ++i) (*w)[i] -= 0.1f * (*dw)[i];
    }
    final_w2[t.rank()] = p.w2;
  });

  for (int r = 1; r < ranks; ++r)
    if (final_w2[r] != final_w2[0]) {
      std::printf("rank %d diverged\n", r);
      return 1;
    }
  if (!(last_loss[0] < 0.5f * first_loss[0])) {
    std::printf("loss did not fall: %.4f -> %.4f\n", first_loss[0], last_loss[0]);
    return 1;
  }
  std::printf("bucketed training: %d ranks hold identical weights; loss %.4f -> %.4f\n", ranks, first_loss[0],
              last_loss[0]);
  return 0;
}
