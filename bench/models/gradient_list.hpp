#pragma once
// The gradient-tensor lists in this folder (written by make_models.py), as
// the benchmarks that replay a backward pass read them: ddl-async-bench
// (real time, real ranks) and ddl-sim --scaling (virtual time).
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <ddl/core/error.hpp>

namespace ddl_bench {

/// One parameter tensor, in forward order.
struct tensor_spec {
  std::string name;
  std::size_t elements;
  double backward_flop;  ///< work of the backward pass that produces its gradient
};

/// `which`: a list shipped here (`resnet50`, `transformer`) or a CSV path
/// (`name,elements,backward_flop` after a header line).
inline std::vector<tensor_spec> load_model(const std::string& which) {
  std::string path = which;
  if (which == "resnet50" || which == "transformer") path = std::string(DDL_BENCH_MODELS_DIR) + "/" + which + ".csv";
  std::ifstream in(path);
  if (!in) throw ddl::invalid_argument("cannot open model file '" + path + "'");
  std::vector<tensor_spec> v;
  std::string line;
  std::getline(in, line);  // header
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::stringstream ss(line);
    std::string name, elems, flop;
    if (!std::getline(ss, name, ',') || !std::getline(ss, elems, ',') || !std::getline(ss, flop, ','))
      throw ddl::invalid_argument(path + ":" + std::to_string(lineno) + ": expected name,elements,backward_flop");
    try {
      v.push_back({name, static_cast<std::size_t>(std::stoull(elems)), std::stod(flop)});
    } catch (const std::exception&) {
      throw ddl::invalid_argument(path + ":" + std::to_string(lineno) + ": '" + elems + "' or '" + flop +
                                  "' is not a number");
    }
  }
  if (v.empty()) throw ddl::invalid_argument(path + ": no tensors");
  return v;
}

/// Each tensor's share of the backward pass's work (its backward FLOPs over
/// the list's), forward order; even shares when the list gives no FLOPs.
inline std::vector<double> backward_shares(const std::vector<tensor_spec>& list) {
  double flop = 0;
  for (const auto& t : list) flop += t.backward_flop;
  std::vector<double> v;
  for (const auto& t : list) v.push_back(flop > 0 ? t.backward_flop / flop : 1.0 / static_cast<double>(list.size()));
  return v;
}

}  // namespace ddl_bench
