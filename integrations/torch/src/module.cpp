// The Python extension `ddl_torch._C`: the creator torch.distributed calls
// for a "ddl" group, choosing the group's transport.
//
// - `DDL_TORCH_TRANSPORT=mpi|ucx` forces one (an error naming it where this
//   build has no such transport);
// - else a process an MPI launcher started (its rank variables are set)
//   runs over MPI, any other over UCX (torchrun, spawn, srun ...), meeting
//   through torch's store;
// - a build with one of them uses it.
// The group's deadline is `DDL_TIMEOUT` where set, else the timeout torch
// passes (`init_process_group(timeout=)`, `new_group(timeout=)`), for the
// UCX rendezvous and for every wait of a collective.
#include <torch/python.h>

#include <pybind11/chrono.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "process_group.hpp"
#ifdef DDL_TORCH_MPI
#include "mpi_group.hpp"
#endif
#ifdef DDL_TORCH_UCX
#include "ucx_group.hpp"
#endif

namespace ddl_torch {

#ifdef DDL_TORCH_MPI
constexpr bool has_mpi = true;
#else
constexpr bool has_mpi = false;
#endif
#ifdef DDL_TORCH_UCX
constexpr bool has_ucx = true;
#else
constexpr bool has_ucx = false;
#endif

// "mpi" or "ucx": what this process's groups run over.
inline std::string transport_choice() {
  const char* forced = std::getenv("DDL_TORCH_TRANSPORT");
  if (forced && *forced) {
    const std::string f(forced);
    TORCH_CHECK(f == "mpi" || f == "ucx", "ddl backend: DDL_TORCH_TRANSPORT='", f, "': expected mpi or ucx");
    TORCH_CHECK(f != "mpi" || has_mpi, "ddl backend: DDL_TORCH_TRANSPORT=mpi, but ddl_torch was built without MPI ",
                "(install libopenmpi-dev and rebuild)");
    TORCH_CHECK(f != "ucx" || has_ucx, "ddl backend: DDL_TORCH_TRANSPORT=ucx, but ddl_torch was built without UCX ",
                "(install libucx-dev and rebuild)");
    return f;
  }
  const bool mpi_launched = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
  if (has_mpi && (mpi_launched || !has_ucx)) return "mpi";
  return "ucx";
}

inline c10::intrusive_ptr<group_base> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                     const std::chrono::duration<float>& timeout) {
  TORCH_CHECK(store, "ddl backend: no store given (torch.distributed passes the group's store)");
  ddl::options opts = ddl::options::from_env();
  if (!std::getenv("DDL_TIMEOUT") && timeout.count() > 0) opts.timeout = timeout;
  const std::string how = transport_choice();
#ifdef DDL_TORCH_MPI
  if (how == "mpi")
    return c10::make_intrusive<process_group<ddl::mpi_transport>>(mpi_group(*store, rank, size), rank, size, opts);
#endif
#ifdef DDL_TORCH_UCX
  if (how == "ucx")
    return c10::make_intrusive<process_group<ddl::ucx_transport>>(ucx_group(*store, rank, size, opts.timeout), rank,
                                                                  size, opts);
#endif
  TORCH_CHECK(false, "ddl backend: no transport (built without MPI and UCX)");
}

}  // namespace ddl_torch

PYBIND11_MODULE(_C, m) {
  m.doc() = "ddl's collectives as a torch.distributed backend";
#if TORCH_VERSION_MAJOR >= 2
  py::object pg = py::module::import("torch._C._distributed_c10d").attr("Backend");
#else
  py::object pg = py::module::import("torch.distributed").attr("ProcessGroup");
#endif
#ifdef DDL_TORCH_MPI
  py::class_<ddl_torch::process_group<ddl::mpi_transport>,
             c10::intrusive_ptr<ddl_torch::process_group<ddl::mpi_transport>>>(m, "ProcessGroupDDL", pg);
#endif
#ifdef DDL_TORCH_UCX
  py::class_<ddl_torch::process_group<ddl::ucx_transport>,
             c10::intrusive_ptr<ddl_torch::process_group<ddl::ucx_transport>>>(m, "ProcessGroupDDLUCX", pg);
#endif
  m.def("transport", &ddl_torch::transport_choice, "What this process's ddl groups run over: 'mpi' or 'ucx'");
  m.def("create_process_group", &ddl_torch::create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>());
}
