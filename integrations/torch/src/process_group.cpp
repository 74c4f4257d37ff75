// ddl as a torch.distributed backend: a c10d::ProcessGroup whose collectives
// are ddl's asynchronous collectives over MPI. Registered as "ddl" by the
// Python package (`import ddl_torch`), so `init_process_group("ddl")` or
// `new_group(backend="ddl")` give a group DistributedDataParallel can use.
//
// Ranks and the group size come from MPI: launch with mpiexec, and they must
// agree with torch's. One dense, contiguous CPU tensor per call; dtypes
// float32, float64, float16, bfloat16, int32, int64; ops SUM, AVG, PRODUCT,
// MIN, MAX. Anything else raises RuntimeError naming what is not supported.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/python.h>

#include <pybind11/chrono.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ddl/mpi.hpp>

namespace ddl_torch {

using comm_t = ddl::communicator<ddl::auto_strategy, ddl::mpi_transport>;

ddl::dtype dtype_of(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kFloat: return ddl::dtype::float32;
    case at::kDouble: return ddl::dtype::float64;
    case at::kHalf: return ddl::dtype::float16;
    case at::kBFloat16: return ddl::dtype::bfloat16;
    case at::kInt: return ddl::dtype::int32;
    case at::kLong: return ddl::dtype::int64;
    default:
      TORCH_CHECK(false, "ddl backend: ", call, " on a tensor of dtype ", t.scalar_type(),
                  " is not supported (float32, float64, float16, bfloat16, int32, int64)");
  }
}

ddl::op op_of(const c10d::ReduceOp& o, const char* call) {
  switch (o.op_) {
    case c10d::ReduceOp::SUM: return ddl::op::sum;
    case c10d::ReduceOp::AVG: return ddl::op::avg;
    case c10d::ReduceOp::PRODUCT: return ddl::op::prod;
    case c10d::ReduceOp::MIN: return ddl::op::min;
    case c10d::ReduceOp::MAX: return ddl::op::max;
    default:
      TORCH_CHECK(false, "ddl backend: ", call, " with reduce op ", static_cast<int>(o.op_),
                  " is not supported (SUM, AVG, PRODUCT, MIN, MAX)");
  }
}

ddl::buffer_view view_of(const at::Tensor& t, const char* call) {
  TORCH_CHECK(t.device().is_cpu(), "ddl backend: ", call, " needs CPU tensors, got one on ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "ddl backend: ", call, " needs dense tensors");
  TORCH_CHECK(t.is_contiguous(), "ddl backend: ", call, " needs contiguous tensors");
  return ddl::buffer_view{t.data_ptr(), static_cast<std::size_t>(t.numel()), dtype_of(t, call), ddl::location{}};
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* call) {
  TORCH_CHECK(ts.size() == 1, "ddl backend: ", call, " takes one tensor per call, got ", ts.size());
  return ts[0];
}

// A collective in flight: ddl's request, torch's future, and what to do
// when the collective has finished (copy a gathered buffer out, ...).
class work : public c10d::Work {
 public:
  work(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  // Runs on the thread that ran the collective, before ddl's wait returns.
  // `then_` goes with it: what it holds (a scratch buffer) is free again.
  void complete(std::exception_ptr e) {
    if (!e && then_) {
      try {
        then_();
      } catch (...) {
        e = std::current_exception();
      }
    }
    then_ = nullptr;
    finish(e);
    if (e) future_->setError(e);
    else future_->markCompleted(c10::IValue(outputs_));
  }

  bool wait(std::chrono::milliseconds /*timeout: ddl's own deadline (DDL_TIMEOUT) bounds every wait*/) override {
    {
      std::lock_guard<std::mutex> lock(request_mutex_);
      if (request_.valid()) {
        try {
          request_.wait();
        } catch (...) {
          // also delivered through complete(): re-thrown below
        }
      }
    }
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return completed_; });
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  ddl::collective_request request_;
  std::mutex request_mutex_;
  std::function<void()> then_;

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Flat buffers for the list forms of allgather and reduce_scatter, kept
// from call to call: a fresh allocation of many MiB is fresh pages, whose
// first writes cost more than the collective (bench/results/torch-backend.md,
// 2026-11-29). A buffer is free again once no tensor views its storage (the
// call's `then_` holds its view until the call completes), so calls in
// flight at once get buffers of their own.
class scratch_pool {
 public:
  at::Tensor get(int64_t numel, const at::TensorOptions& options) {
    const at::ScalarType type = options.dtype().toScalarType();
    const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(type));
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t pick = buffers_.size();
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (unused(buffers_[i]) && buffers_[i].numel() >= bytes &&
          (pick == buffers_.size() || buffers_[i].numel() < buffers_[pick].numel()))
        pick = i;
    if (pick == buffers_.size()) {
      if (buffers_.size() >= keep)  // free ones were too small: the new one replaces them
        buffers_.erase(std::remove_if(buffers_.begin(), buffers_.end(), [](const at::Tensor& b) { return unused(b); }),
                       buffers_.end());
      buffers_.push_back(at::empty({std::max<int64_t>(bytes, 1)}, at::TensorOptions().dtype(at::kByte)));
      pick = buffers_.size() - 1;
    }
    return buffers_[pick].narrow(0, 0, bytes).view(type);
  }

 private:
  static constexpr std::size_t keep = 4;
  static bool unused(const at::Tensor& b) { return b.storage().use_count() == 1; }
  std::mutex mutex_;
  std::vector<at::Tensor> buffers_;
};

// MPI for the whole process: initialised by the first group, finalised at
// exit. Each group has its own transport, whose communicator's progress
// thread calls MPI while Python goes on, and programs make several groups
// (`new_group(backend="ddl")` beside `init_process_group("ddl")`): so
// MPI_THREAD_MULTIPLE, which lets those threads call MPI at once.
ddl::mpi_session& mpi() {
  static ddl::mpi_session session(MPI_THREAD_MULTIPLE);
  return session;
}

// How many ddl groups are alive in this process.
std::atomic<int>& groups_alive() {
  static std::atomic<int> n{0};
  return n;
}

class process_group : public c10d::ProcessGroup {
 public:
  process_group(int rank, int size) : c10d::ProcessGroup(rank, size) {
    mpi();
    int mpi_rank = 0, mpi_size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    TORCH_CHECK(mpi_size == size && mpi_rank == rank, "ddl backend: runs over MPI and needs torch's ranks to be MPI's: ",
                "torch says rank ", rank, " of ", size, ", MPI says rank ", mpi_rank, " of ", mpi_size,
                ". Launch with `mpiexec -n ", size, " python ...` and take rank and world size from MPI "
                "(OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/SIZE)");
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    TORCH_CHECK(groups_alive() == 0 || level >= MPI_THREAD_MULTIPLE,
                "ddl backend: a second ddl group in this process needs MPI initialised with MPI_THREAD_MULTIPLE ",
                "(each group's progress thread calls MPI), and MPI was initialised with level ", level,
                " before the first ddl group (by another library?). Initialise it with MPI_THREAD_MULTIPLE, or use "
                "one ddl group");
    transport_ = std::make_unique<ddl::mpi_transport>(MPI_COMM_WORLD);
    comm_ = std::make_unique<comm_t>(*transport_);
    ++groups_alive();
  }
  ~process_group() override {
    comm_->wait_all();
    --groups_alive();
  }

  const std::string getBackendName() const override { return "ddl"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const at::Tensor& t = single(tensors, "allreduce");
    auto v = view_of(t, "allreduce");
    const ddl::op o = op_of(opts.reduceOp, "allreduce");
    return start(c10d::OpType::ALLREDUCE, {t}, [&](auto done) { return comm_->all_reduce_async(v, o, done); });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const at::Tensor& t = single(tensors, "broadcast");
    auto v = view_of(t, "broadcast");
    const int root = static_cast<int>(opts.rootRank);
    return start(c10d::OpType::BROADCAST, {t}, [&](auto done) { return comm_->broadcast_async(v, root, done); });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) override {
    const at::Tensor& in = single(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "ddl backend: allgather needs one list of ", getSize(), " output tensors");
    for (const auto& o : outputs[0])
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "ddl backend: allgather outputs must match the input's size and dtype");
    // Gather into one flat buffer (ddl's blocks), then copy out per rank.
    at::Tensor flat = scratch_.get(getSize() * in.numel(), in.options());
    auto iv = view_of(in, "allgather");
    auto fv = view_of(flat, "allgather");
    std::vector<at::Tensor> outs = outputs[0];
    auto w = make(c10d::OpType::ALLGATHER, outs);
    w->then_ = [flat, outs] {
      for (std::size_t i = 0; i < outs.size(); ++i) outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * outs[i].numel(), outs[i].numel()).view_as(outs[i]));
    };
    return launch(w, [&](auto done) { return comm_->all_gather_async(iv, fv, done); });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    TORCH_CHECK(output.numel() == getSize() * input.numel(), "ddl backend: _allgather_base output must hold ",
                getSize(), " x the input's ", input.numel(), " elements");
    auto iv = view_of(input, "_allgather_base");
    auto ov = view_of(output, "_allgather_base");
    return start(c10d::OpType::_ALLGATHER_BASE, {output},
                 [&](auto done) { return comm_->all_gather_async(iv, ov, done); });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const at::Tensor& out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "ddl backend: reduce_scatter needs one list of ", getSize(), " input tensors");
    for (const auto& i : inputs[0])
      TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                  "ddl backend: reduce_scatter inputs must match the output's size and dtype");
    at::Tensor flat = scratch_.get(getSize() * out.numel(), out.options());
    for (std::size_t i = 0; i < inputs[0].size(); ++i)
      flat.narrow(0, static_cast<int64_t>(i) * out.numel(), out.numel()).view_as(inputs[0][i]).copy_(inputs[0][i]);
    auto fv = view_of(flat, "reduce_scatter");
    auto ov = view_of(out, "reduce_scatter");
    const ddl::op o = op_of(opts.reduceOp, "reduce_scatter");
    auto w = make(c10d::OpType::REDUCE_SCATTER, {out});
    w->then_ = [flat] {};  // keeps the packed input alive until the collective has finished
    return launch(w, [&](auto done) { return comm_->reduce_scatter_async(fv, ov, o, done); });
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

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return start(c10d::OpType::BARRIER, {}, [&](auto done) { return comm_->barrier_async(done); });
  }

 private:
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

  std::unique_ptr<ddl::mpi_transport> transport_;
  std::unique_ptr<comm_t> comm_;
  scratch_pool scratch_;
};

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>&, int rank, int size,
                                              const std::chrono::duration<float>&) {
  return c10::make_intrusive<process_group>(rank, size);
}

}  // namespace ddl_torch

PYBIND11_MODULE(_C, m) {
  m.doc() = "ddl's collectives as a torch.distributed backend";
  py::object pg = py::module::import("torch.distributed").attr("ProcessGroup");
  py::class_<ddl_torch::process_group, c10::intrusive_ptr<ddl_torch::process_group>>(m, "ProcessGroupDDL", pg)
      .def(py::init<int, int>(), py::arg("rank"), py::arg("size"));
  m.def("create_process_group", &ddl_torch::create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>());
}
