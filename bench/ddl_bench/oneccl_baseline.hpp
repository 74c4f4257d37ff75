#pragma once
// ddl-bench's oneCCL baseline (`--baseline oneccl`, with DDL_BENCH_ONECCL):
// Intel's oneCCL, the CPU collective library behind torch-ccl, in the same
// MPI job as ddl (Intel MPI from PyPI's impi-rt is both oneCCL's transport
// and ddl's MPI: ddl-bench is built against its headers; see
// docs/benchmarks.md). Its communicator is made through its key-value store,
// rank 0's address traded over MPI. Rows for all_reduce, reduce_scatter,
// all_gather and broadcast, in place and out of place, checked like ddl's.
#if defined(DDL_BENCH_MPI) && defined(DDL_BENCH_ONECCL)
#include <mpi.h>

#include <oneapi/ccl.hpp>

#include <memory>
#include <string>
#include <vector>

#include "measure.hpp"
#include "options.hpp"

namespace ddl_bench {

// oneCCL's name for a ddl dtype; false where it has none.
inline bool ccl_type(ddl::dtype t, ccl::datatype& out) {
  switch (t) {
    case ddl::dtype::float32: out = ccl::datatype::float32; return true;
    case ddl::dtype::float64: out = ccl::datatype::float64; return true;
    case ddl::dtype::int32: out = ccl::datatype::int32; return true;
    case ddl::dtype::int64: out = ccl::datatype::int64; return true;
    case ddl::dtype::float16: out = ccl::datatype::float16; return true;
    case ddl::dtype::bfloat16: out = ccl::datatype::bfloat16; return true;
    default: return false;
  }
}
inline ccl::reduction ccl_op(ddl::op o) {
  switch (o) {
    case ddl::op::prod: return ccl::reduction::prod;
    case ddl::op::min: return ccl::reduction::min;
    case ddl::op::max: return ccl::reduction::max;
    case ddl::op::avg: return ccl::reduction::avg;
    default: return ccl::reduction::sum;
  }
}

// One oneCCL communicator over the ranks of `comm`, made once.
class oneccl_baseline {
 public:
  explicit oneccl_baseline(MPI_Comm comm) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ccl::init();
    ccl::shared_ptr_class<ccl::kvs> kvs;
    ccl::kvs::address_type address{};
    if (rank == 0) {
      kvs = ccl::create_main_kvs();
      address = kvs->get_address();
    }
    MPI_Bcast(address.data(), static_cast<int>(address.size()), MPI_BYTE, 0, comm);
    if (rank != 0) kvs = ccl::create_kvs(address);
    comm_ = std::make_shared<ccl::communicator>(ccl::create_communicator(size, rank, kvs));
    rank_ = rank;
    size_ = size;
  }

  // The row for `s`'s collective, or a note in `found` saying why there is none.
  void add(const settings& s, std::vector<impl>& impls, std::string& found) const {
    ccl::datatype dt{};
    if (!ccl_type(s.type, dt)) {
      found += std::string("; oneCCL not compared: no ") + ddl::name_of(s.type);
      return;
    }
    const ccl::reduction op = ccl_op(s.oper);
    const std::size_t es = ddl::size_of(s.type);
    const int n = size_, r = rank_;
    auto comm = comm_;
    impl m;
    switch (s.coll) {
      case collective::all_reduce:
        m.label = "oneCCL_allreduce";
        m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
          ccl::allreduce(in, out, c, dt, op, *comm).wait();
        };
        m.ip = [=](std::byte* buf, std::size_t c) { ccl::allreduce(buf, buf, c, dt, op, *comm).wait(); };
        break;
      case collective::reduce_scatter:  // in place: the rank's block where it lies (as NCCL's convention)
        m.label = "oneCCL_reduce_scatter";
        m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
          ccl::reduce_scatter(in, out, c / n, dt, op, *comm).wait();
        };
        m.ip = [=](std::byte* buf, std::size_t c) {
          ccl::reduce_scatter(buf, buf + static_cast<std::size_t>(r) * (c / n) * es, c / n, dt, op, *comm).wait();
        };
        break;
      case collective::all_gather:
        m.label = "oneCCL_allgather";
        m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
          ccl::allgather(in + static_cast<std::size_t>(r) * (c / n) * es, out, c / n, dt, *comm).wait();
        };
        m.ip = [=](std::byte* buf, std::size_t c) {
          ccl::allgather(buf + static_cast<std::size_t>(r) * (c / n) * es, buf, c / n, dt, *comm).wait();
        };
        break;
      case collective::broadcast:
        m.label = "oneCCL_broadcast";
        m.ip = [=](std::byte* buf, std::size_t c) { ccl::broadcast(buf, c, dt, 0, *comm).wait(); };
        break;
      default:
        found += "; oneCCL not compared: all_reduce, reduce_scatter, all_gather and broadcast only";
        return;
    }
    impls.push_back(std::move(m));
  }

 private:
  std::shared_ptr<ccl::communicator> comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace ddl_bench
#endif
