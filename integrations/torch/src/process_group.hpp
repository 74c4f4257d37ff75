#pragma once
// ddl as a torch.distributed backend: a c10d::ProcessGroup whose collectives
// are ddl's asynchronous collectives over a process transport (MPI or UCX,
// `module.cpp` chooses).
//
// all_reduce (and allreduce_coalesced), broadcast, all_gather, reduce_scatter
// (list and flat forms), all_to_all (list and flat forms, split sizes),
// barrier, reduce, gather, scatter, and send and recv (from one rank or any). One
// dense, contiguous CPU tensor per call; reductions take float32, float64,
// float16, bfloat16, int32, int64 and SUM, AVG, PRODUCT, MIN, MAX; calls
// that only move data take any dtype. Anything else (CUDA tensors, other
// dtypes or ops) raises RuntimeError naming what is not supported.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ddl.hpp>

#include "lists.hpp"
#include "tensors.hpp"
#include "work.hpp"

namespace ddl_torch {

// Torch 2.x dispatches a group's calls to a c10d::Backend registered per
// device type; torch 1.x calls a c10d::ProcessGroup subclass itself. The
// collectives' signatures are the same.
#if TORCH_VERSION_MAJOR >= 2
using group_base = c10d::Backend;
#else
using group_base = c10d::ProcessGroup;
#endif

template <class Transport>
class process_group : public group_base {
 public:
  using comm_t = ddl::communicator<ddl::auto_strategy, Transport>;

  // `transport`: the group's members, this process torch's rank (checked);
  // `opts`: the communicator's settings (its deadline: `timeout`).
  process_group(std::unique_ptr<Transport> transport, int rank, int size, ddl::options opts)
      : group_base(rank, size), transport_(std::move(transport)) {
    TORCH_CHECK(transport_->rank() == rank && transport_->size() == size, "ddl backend: the group's transport has rank ",
                transport_->rank(), " of ", transport_->size(), " where torch says ", rank, " of ", size);
    comm_ = std::make_unique<comm_t>(*transport_, ddl::auto_strategy{}, opts);
  }
  ~process_group() override { comm_->wait_all(); }

  const std::string getBackendName() const override { return "ddl"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const at::Tensor& t = single(tensors, "allreduce");
    auto v = view_of(t, "allreduce");
    const ddl::op o = op_of(opts.reduceOp, "allreduce");
    return start(c10d::OpType::ALLREDUCE, {t}, [&](auto done) { return comm_->all_reduce_async(v, o, done); });
  }

  // Several tensors of one dtype reduced in one call: packed into a scratch
  // buffer, all-reduced in place, copied back.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    TORCH_CHECK(!tensors.empty(), "ddl backend: allreduce_coalesced needs at least one tensor");
    const ddl::op o = op_of(opts.reduceOp, "allreduce_coalesced");
    int64_t total = 0;
    for (const auto& t : tensors) {
      view_of(t, "allreduce_coalesced");
      TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "ddl backend: allreduce_coalesced needs tensors of ",
                  "one dtype, got ", tensors[0].scalar_type(), " and ", t.scalar_type());
      total += t.numel();
    }
    at::Tensor flat = scratch_.get(total, tensors[0].options());
    int64_t at = 0;
    for (const auto& t : tensors) {
      flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
      at += t.numel();
    }
    auto v = view_of(flat, "allreduce_coalesced");
    auto w = make(c10d::OpType::ALLREDUCE_COALESCED, tensors);
    w->then_ = [flat, tensors] {
      int64_t from = 0;
      for (const auto& t : tensors) {
        t.copy_(flat.narrow(0, from, t.numel()).view_as(t));
        from += t.numel();
      }
    };
    return launch(w, [&](auto done) { return comm_->all_reduce_async(v, o, done); });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const at::Tensor& t = single(tensors, "broadcast");
    const int root = root_of(opts.rootRank, getSize(), "broadcast");
    if (!native(t)) {
      check_dense(t, "broadcast");
      const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
      at::Tensor words = words_for(1, bytes);
      if (getRank() == root) part_bytes(words, 1, 0, bytes).copy_(bytes_of(t));
      auto v = view_of(words, "broadcast");
      auto w = make(c10d::OpType::BROADCAST, {t});
      w->then_ = [words, t, bytes, mine = getRank() == root] {
        if (!mine) bytes_of(t).copy_(part_bytes(words, 1, 0, bytes));
      };
      return launch(w, [&](auto done) { return comm_->broadcast_async(v, root, done); });
    }
    auto v = view_of(t, "broadcast");
    return start(c10d::OpType::BROADCAST, {t}, [&](auto done) { return comm_->broadcast_async(v, root, done); });
  }

  // Torch's `reduce`: ddl's reduce, in place on the root; the other ranks'
  // tensors keep their values (ddl reads them and writes nothing there).
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    const at::Tensor& t = single(tensors, "reduce");
    const int root = root_of(opts.rootRank, getSize(), "reduce");
    const ddl::op o = op_of(opts.reduceOp, "reduce");
    auto v = view_of(t, "reduce");
    const ddl::buffer_view out = getRank() == root ? v : ddl::buffer_view{};
    return start(c10d::OpType::REDUCE, {t}, [&](auto done) { return comm_->reduce_async(v, out, o, root, done); });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) override {
    const at::Tensor& in = single(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1, "ddl backend: allgather needs one list of ", getSize(), " output tensors");
    return gather_list(c10d::OpType::ALLGATHER, in, outputs[0], "allgather");
  }

  // Torch's `gather`: ddl's gather into a scratch buffer on the root,
  // copied out there into the list.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    const at::Tensor& in = single(inputs, "gather");
    const int root = root_of(opts.rootRank, getSize(), "gather");
    if (getRank() != root) {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                  "ddl backend: gather takes output tensors on the root (rank ", root, ") only");
      std::vector<at::Tensor> none;
      return gather_list(c10d::OpType::GATHER, in, none, "gather", root);
    }
    TORCH_CHECK(outputs.size() == 1, "ddl backend: gather needs one list of ", getSize(),
                " output tensors on the root");
    return gather_list(c10d::OpType::GATHER, in, outputs[0], "gather", root);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    TORCH_CHECK(output.numel() == getSize() * input.numel(), "ddl backend: _allgather_base output must hold ",
                getSize(), " x the input's ", input.numel(), " elements");
    if (!native(input)) {
      TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ddl backend: _allgather_base output must have the ",
                  "input's dtype");
      check_dense(output, "_allgather_base");
      std::vector<at::Tensor> outs;
      for (int64_t i = 0; i < getSize(); ++i)
        outs.push_back(output.reshape({-1}).narrow(0, i * input.numel(), input.numel()));
      return gather_bytes(c10d::OpType::_ALLGATHER_BASE, input, outs, {output}, "_allgather_base", -1);
    }
    auto iv = view_of(input, "_allgather_base");
    auto ov = view_of(output, "_allgather_base");
    return start(c10d::OpType::_ALLGATHER_BASE, {output},
                 [&](auto done) { return comm_->all_gather_async(iv, ov, done); });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const at::Tensor& out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1, "ddl backend: reduce_scatter needs one list of ", getSize(), " input tensors");
    at::Tensor flat = pack(out, inputs[0], "reduce_scatter");
    auto fv = view_of(flat, "reduce_scatter");
    auto ov = view_of(out, "reduce_scatter");
    const ddl::op o = op_of(opts.reduceOp, "reduce_scatter");
    auto w = make(c10d::OpType::REDUCE_SCATTER, {out});
    w->then_ = [flat] {};  // keeps the packed input alive until the collective has finished
    return launch(w, [&](auto done) { return comm_->reduce_scatter_async(fv, ov, o, done); });
  }

  // Torch's `scatter`: ddl's scatter of the root's parts, packed into a
  // scratch buffer, straight into every rank's output tensor (into words
  // copied out where ddl does not reduce the dtype).
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    const at::Tensor& out = single(outputs, "scatter");
    const int root = root_of(opts.rootRank, getSize(), "scatter");
    check_dense(out, "scatter");
    at::Tensor flat;
    if (getRank() == root) {
      TORCH_CHECK(inputs.size() == 1, "ddl backend: scatter needs one list of ", getSize(),
                  " input tensors on the root");
      flat = pack(out, inputs[0], "scatter");
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                  "ddl backend: scatter takes input tensors on the root (rank ", root, ") only");
    }
    const ddl::buffer_view fv = flat.defined() ? view_of(flat, "scatter") : ddl::buffer_view{};
    auto w = make(c10d::OpType::SCATTER, {out});
    if (native(out)) {
      auto ov = view_of(out, "scatter");
      w->then_ = [flat] {};  // keeps the packed input alive until the collective has finished
      return launch(w, [&](auto done) { return comm_->scatter_async(fv, ov, root, done); });
    }
    const int64_t bytes = out.numel() * static_cast<int64_t>(out.element_size());
    at::Tensor mine = words_for(1, bytes);
    auto mv = view_of(mine, "scatter");
    w->then_ = [flat, mine, out, bytes] { bytes_of(out).copy_(part_bytes(mine, 1, 0, bytes)); };
    return launch(w, [&](auto done) { return comm_->scatter_async(fv, mv, root, done); });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(input.numel() == getSize() * output.numel(), "ddl backend: _reduce_scatter_base input must hold ",
                getSize(), " x the output's ", output.numel(), " elements");
    auto iv = view_of(input, "_reduce_scatter_base");
    auto ov = view_of(output, "_reduce_scatter_base");
    const ddl::op o = op_of(opts.reduceOp, "_reduce_scatter_base");
    return start(c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                 [&](auto done) { return comm_->reduce_scatter_async(iv, ov, o, done); });
  }

  // Torch's all_to_all_single: the input's rows (dim 0) in parts of
  // `inputSplitSizes` rows, part k to rank k; the output's likewise from
  // each rank (no split sizes: equal parts). ddl's all_to_all with counts,
  // on the tensors where they lie (through scratch as bytes for dtypes ddl
  // does not reduce, see `native`).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions&) override {
    const char* call = "alltoall_base";
    check_dense(input, call);
    check_dense(output, call);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ddl backend: ", call, " output must have the input's ",
                "dtype, got ", output.scalar_type(), " and ", input.scalar_type());
    const std::vector<int64_t> sends = split_counts(input, inputSplitSizes, getSize(), call, "input");
    const std::vector<int64_t> recvs = split_counts(output, outputSplitSizes, getSize(), call, "output");
    if (!native(input)) {
      return all_to_all_packed(c10d::OpType::ALLTOALL_BASE, parts_of(input, sends), parts_of(output, recvs), {output},
                               call);
    }
    auto iv = view_of(input, call);
    auto ov = view_of(output, call);
    return start(c10d::OpType::ALLTOALL_BASE, {output}, [&](auto done) {
      return comm_->all_to_all_async(iv, sizes_of(sends), ov, sizes_of(recvs), done);
    });
  }

  // Torch's all_to_all: `inputs[k]` to rank k, `outputs[j]` from rank j, any
  // sizes, one dtype; packed into scratch buffers and copied out.
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions&) override {
    const char* call = "alltoall";
    TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() && static_cast<int>(outputs.size()) == getSize(),
                "ddl backend: ", call, " needs lists of ", getSize(), " input and output tensors, got ", inputs.size(),
                " and ", outputs.size());
    return all_to_all_packed(c10d::OpType::ALLTOALL, inputs, outputs, outputs, call);
  }

  // Point-to-point (a pipeline's hand-offs between stages): ddl's
  // asynchronous send and recv, which take their place among the group's
  // calls in issue order without holding later ones up. Any dtype: those ddl
  // does not reduce move as their bytes in int32 words through scratch.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override {
    return transfer(c10d::OpType::SEND, single(tensors, "send"), false, "send", [&](const ddl::buffer_view& v, auto done) {
      return comm_->send_async(v, dstRank, tag, done);
    });
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override {
    return transfer(c10d::OpType::RECV, single(tensors, "recv"), true, "recv", [&](const ddl::buffer_view& v, auto done) {
      return comm_->recv_async(v, srcRank, tag, done);
    });
  }
  // `recv` without `src`: whichever rank's message under `tag` comes first
  // (`recv_any`); the work's `sourceRank()` names it once complete.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    return transfer(c10d::OpType::RECVANYSOURCE, single(tensors, "recv"), true, "recv",
                    [&](const ddl::buffer_view& v, auto done) { return comm_->recv_any_async(v, tag, done); });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return start(c10d::OpType::BARRIER, {}, [&](auto done) { return comm_->barrier_async(done); });
  }
  // torch's monitored_barrier: a barrier whose failure names the rank that
  // did not come (ddl's timeout_error does), at the group's deadline.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool /*wait_all_ranks: ddl names the first*/) override {
    barrier(opts)->wait();
  }

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  // The coalesced forms FSDP issues (torch 2.1+): one all-gather of every
  // input packed into one buffer (one dtype), unpacked into the outputs.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions&) override {
    const char* call = "allgather_into_tensor_coalesced";
    const int64_t total = coalesced_total(outputs, inputs, getSize(), call);
    at::Tensor flat_in = scratch_.get(total, inputs[0].options()), flat_out = scratch_.get(getSize() * total, inputs[0].options());
    for (std::size_t i = 0, at = 0; i < inputs.size(); at += static_cast<std::size_t>(inputs[i].numel()), ++i)
      flat_in.narrow(0, static_cast<int64_t>(at), inputs[i].numel()).copy_(inputs[i].reshape({-1}));
    auto iv = view_of(flat_in, call);
    auto ov = view_of(flat_out, call);
    auto w = make(c10d::OpType::COALESCED, outputs);
    const int64_t n = getSize();
    w->then_ = [flat_in, flat_out, outputs, inputs, total, n] {
      for (int64_t r = 0; r < n; ++r)
        for (std::size_t i = 0, at = 0; i < inputs.size(); at += static_cast<std::size_t>(inputs[i].numel()), ++i) {
          const int64_t len = inputs[i].numel();
          outputs[i].reshape({-1}).narrow(0, r * len, len).copy_(flat_out.narrow(0, r * total + static_cast<int64_t>(at), len));
        }
    };
    return launch(w, [&](auto done) { return comm_->all_gather_async(iv, ov, done); });
  }
  // And one reduce-scatter of every input, packed rank by rank.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    const char* call = "reduce_scatter_tensor_coalesced";
    const int64_t total = coalesced_total(inputs, outputs, getSize(), call);
    const ddl::op o = op_of(opts.reduceOp, call);
    const int64_t n = getSize();
    at::Tensor flat_in = scratch_.get(n * total, inputs[0].options()), flat_out = scratch_.get(total, inputs[0].options());
    for (int64_t r = 0; r < n; ++r)
      for (std::size_t i = 0, at = 0; i < outputs.size(); at += static_cast<std::size_t>(outputs[i].numel()), ++i) {
        const int64_t len = outputs[i].numel();
        flat_in.narrow(0, r * total + static_cast<int64_t>(at), len).copy_(inputs[i].reshape({-1}).narrow(0, r * len, len));
      }
    auto iv = view_of(flat_in, call);
    auto ov = view_of(flat_out, call);
    auto w = make(c10d::OpType::COALESCED, outputs);
    w->then_ = [flat_in, flat_out, outputs] {
      for (std::size_t i = 0, at = 0; i < outputs.size(); at += static_cast<std::size_t>(outputs[i].numel()), ++i)
        outputs[i].reshape({-1}).copy_(flat_out.narrow(0, static_cast<int64_t>(at), outputs[i].numel()));
    };
    return launch(w, [&](auto done) { return comm_->reduce_scatter_async(iv, ov, o, done); });
  }
#endif

 private:
  // All parts gathered into a scratch buffer (ddl's blocks), then copied out
  // to `outs`: on every rank (`root` < 0: ddl's all_gather) or on `root`
  // alone (ddl's gather; the other ranks pass no `outs` and hold no buffer).
  c10::intrusive_ptr<c10d::Work> gather_list(c10d::OpType type, const at::Tensor& in,
                                             const std::vector<at::Tensor>& outs, const char* call, int root = -1) {
    if (!outs.empty()) check_parts(in, outs, getSize(), call, "input");
    if (!native(in)) return gather_bytes(type, in, outs, outs, call, root);
    const bool whole = root < 0 || getRank() == root;
    at::Tensor flat = whole ? scratch_.get(getSize() * in.numel(), in.options()) : at::Tensor();
    auto iv = view_of(in, call);
    const ddl::buffer_view fv = whole ? view_of(flat, call) : ddl::buffer_view{};
    auto w = make(type, outs);
    w->then_ = [flat, outs] {
      for (std::size_t i = 0; i < outs.size(); ++i)
        outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * outs[i].numel(), outs[i].numel()).view_as(outs[i]));
    };
    return launch(w, [&](auto done) { return gather_to(root, iv, fv, done); });
  }
  // The gather of a dtype ddl does not reduce, as bytes (see `native`): the
  // input into a scratch buffer of words, every part gathered into another
  // (on every rank, or on `root` alone), each copied out to `outs`.
  c10::intrusive_ptr<c10d::Work> gather_bytes(c10d::OpType type, const at::Tensor& in,
                                              const std::vector<at::Tensor>& outs, std::vector<at::Tensor> results,
                                              const char* call, int root) {
    check_dense(in, call);
    for (const auto& o : outs) check_dense(o, call);
    const int64_t n = getSize(), bytes = in.numel() * static_cast<int64_t>(in.element_size());
    const bool whole = root < 0 || getRank() == root;
    at::Tensor mine = words_for(1, bytes), all = whole ? words_for(n, bytes) : at::Tensor();
    part_bytes(mine, 1, 0, bytes).copy_(bytes_of(in));
    auto iv = view_of(mine, call);
    const ddl::buffer_view av = whole ? view_of(all, call) : ddl::buffer_view{};
    auto w = make(type, std::move(results));
    w->then_ = [mine, all, outs, n, bytes] {
      for (std::size_t i = 0; i < outs.size(); ++i)
        bytes_of(outs[i]).copy_(part_bytes(all, n, static_cast<int64_t>(i), bytes));
    };
    return launch(w, [&](auto done) { return gather_to(root, iv, av, done); });
  }
  // `in` from every rank into `out`: ddl's all_gather (`root` < 0) or gather.
  template <class Done>
  ddl::collective_request gather_to(int root, const ddl::buffer_view& in, const ddl::buffer_view& out, Done&& done) {
    if (root < 0) return comm_->all_gather_async(in, out, std::forward<Done>(done));
    return comm_->gather_async(in, out, root, std::forward<Done>(done));
  }
  // `parts` (one per rank, each like `like`) packed into a scratch buffer
  // (as bytes in words where ddl does not reduce the dtype).
  at::Tensor pack(const at::Tensor& like, const std::vector<at::Tensor>& parts, const char* call) {
    check_parts(like, parts, getSize(), call, "output");
    const int64_t n = getSize(), bytes = like.numel() * static_cast<int64_t>(like.element_size());
    if (!native(like)) {
      at::Tensor words = words_for(n, bytes);
      for (int64_t i = 0; i < n; ++i) {
        check_dense(parts[static_cast<std::size_t>(i)], call);
        part_bytes(words, n, i, bytes).copy_(bytes_of(parts[static_cast<std::size_t>(i)]));
      }
      return words;
    }
    at::Tensor flat = scratch_.get(n * like.numel(), like.options());
    for (std::size_t i = 0; i < parts.size(); ++i)
      flat.narrow(0, static_cast<int64_t>(i) * like.numel(), like.numel()).view_as(parts[i]).copy_(parts[i]);
    return flat;
  }
  // An all-to-all of `ins[k]` (to rank k) into `outs[j]` (from rank j),
  // packed into a scratch buffer and copied out once it has finished: the
  // tensors' elements, or their bytes in int32 words (each part padded to
  // whole words) where ddl does not reduce the dtype.
  c10::intrusive_ptr<c10d::Work> all_to_all_packed(c10d::OpType type, const std::vector<at::Tensor>& ins,
                                                   const std::vector<at::Tensor>& outs, std::vector<at::Tensor> results,
                                                   const char* call) {
    const at::ScalarType st = ins[0].scalar_type();
    for (const auto* list : {&ins, &outs})
      for (const auto& t : *list) {
        check_dense(t, call);
        TORCH_CHECK(t.scalar_type() == st, "ddl backend: ", call, " needs tensors of one dtype, got ", st, " and ",
                    t.scalar_type());
      }
    const bool bytes = !native(ins[0]);
    auto size_in_bytes = [](const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); };
    // A part as ddl moves it: its elements, or its bytes in words.
    auto length = [&](const at::Tensor& t) { return bytes ? words_in(size_in_bytes(t)) : t.numel(); };
    // Where a part lies in a scratch buffer, as `t`'s elements or bytes.
    auto slot = [bytes, size_in_bytes](const at::Tensor& flat, int64_t at, const at::Tensor& t) {
      return bytes ? flat.narrow(0, at, words_in(size_in_bytes(t))).view(at::kByte).narrow(0, 0, size_in_bytes(t))
                   : flat.narrow(0, at, t.numel()).view_as(t);
    };
    std::vector<std::size_t> sends, recvs;
    int64_t in_total = 0, out_total = 0;
    for (const auto& t : ins) in_total += static_cast<int64_t>(sends.emplace_back(static_cast<std::size_t>(length(t))));
    for (const auto& t : outs) out_total += static_cast<int64_t>(recvs.emplace_back(static_cast<std::size_t>(length(t))));
    const at::TensorOptions options = bytes ? at::TensorOptions().dtype(at::kInt) : ins[0].options();
    at::Tensor flat_in = scratch_.get(in_total, options), flat_out = scratch_.get(out_total, options);
    for (std::size_t k = 0, at = 0; k < ins.size(); at += sends[k], ++k)
      slot(flat_in, static_cast<int64_t>(at), ins[k]).copy_(bytes ? bytes_of(ins[k]) : ins[k]);
    auto iv = view_of(flat_in, call);
    auto ov = view_of(flat_out, call);
    auto w = make(type, std::move(results));
    w->then_ = [flat_in, flat_out, outs, recvs, slot, bytes] {
      for (std::size_t j = 0, at = 0; j < outs.size(); at += recvs[j], ++j) {
        const at::Tensor from = slot(flat_out, static_cast<int64_t>(at), outs[j]);
        if (bytes) bytes_of(outs[j]).copy_(from);
        else outs[j].copy_(from);
      }
    };
    return launch(w, [&](auto done) { return comm_->all_to_all_async(iv, sends, ov, recvs, done); });
  }
  // A send or receive of `t` (`incoming`: a receive): `issue(view, done)`
  // starts it on the tensor where ddl takes its dtype, else on its bytes in
  // a scratch buffer of int32 words (copied in before a send, out after a
  // receive; busy until the transfer has finished).
  template <class Issue>
  c10::intrusive_ptr<c10d::Work> transfer(c10d::OpType type, const at::Tensor& t, bool incoming, const char* call,
                                          Issue&& issue) {
    check_dense(t, call);
    auto w = make(type, {t});
    if (native(t)) {
      const ddl::buffer_view v = view_of(t, call);
      return launch(w, [&](auto done) { return issue(v, done); });
    }
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    at::Tensor words = words_for(1, bytes);
    if (!incoming) part_bytes(words, 1, 0, bytes).copy_(bytes_of(t));
    const ddl::buffer_view v = view_of(words, call);
    w->then_ = [words, t, bytes, incoming] {
      if (incoming) bytes_of(t).copy_(part_bytes(words, 1, 0, bytes));
    };
    return launch(w, [&](auto done) { return issue(v, done); });
  }
  // int32 words that hold `bytes` bytes.
  static int64_t words_in(int64_t bytes) { return (bytes + 3) / 4; }
  // A scratch buffer of int32 words for `parts` parts of `bytes` bytes each.
  at::Tensor words_for(int64_t parts, int64_t bytes) {
    return scratch_.get(parts * words_in(bytes), at::TensorOptions().dtype(at::kInt));
  }
  c10::intrusive_ptr<work> make(c10d::OpType type, std::vector<at::Tensor> outputs) {
    return c10::make_intrusive<work>(getRank(), type, std::move(outputs));
  }
  template <class Issue>
  c10::intrusive_ptr<c10d::Work> launch(const c10::intrusive_ptr<work>& w, Issue&& issue) {
    std::lock_guard<std::mutex> lock(w->request_mutex_);
    w->request_ = issue([w](std::exception_ptr e) { w->complete(e); });
    return w;
  }
  template <class Issue>
  c10::intrusive_ptr<c10d::Work> start(c10d::OpType type, std::vector<at::Tensor> outputs, Issue&& issue) {
    return launch(make(type, std::move(outputs)), std::forward<Issue>(issue));
  }

  std::unique_ptr<Transport> transport_;
  std::unique_ptr<comm_t> comm_;
  scratch_pool scratch_;
};

}  // namespace ddl_torch
