// ddl-sim: what would this cluster do? Runs ddl's strategies on the
// virtual-time transport (`ddl::sim_transport`) over a described network.
//
//   ddl-sim --preset paper --bytes 350e6 --strategy all
//   ddl-sim --topology 4:20GB/s:3us,16:10GB/s:5us,16:9.5GB/s:8us --bytes 350e6 --strategy auto
//   ddl-sim --preset paper --scaling --model resnet50 --csv out.csv --plot out.png
//   ddl-sim --preset paper --shared-levels 1 --bytes 64M --strategy all
//
// --shared-levels K: the ranks of one unit of the K innermost levels read
// each other's memory (a node's GPUs over NVLink): the direct strategies
// (one_shot, two_shot, a multi-ring's direct-first dimension) run there,
// every read of a peer's memory a flow over the links between them
// (`sim_options::shared_levels`).
//
// Per strategy it prints the cost model's prediction, the simulated time, its
// ratio to the bandwidth floor no all-reduce beats on these links
// (`cost::all_reduce_floor`, named with its level above the table), the
// level that bounded the run (the highest level crossed by messages in
// flight the longest) and that level's busiest link. In --scaling mode it
// prints speed-up and scaling efficiency from 1 to N GPUs for a model's
// compute time and gradient size, without overlap (compute, then one
// all-reduce of all gradients) and with it: the training step played out in
// virtual time with ddl's own gradient buckets, each gradient marked ready
// as the emulated backward pass produces it (the model's tensor list,
// bench/models/), its buckets reduced by asynchronous collectives while the
// backward pass goes on.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ddl/sim.hpp>

#include "models/gradient_list.hpp"

namespace {

struct preset {
  const char* name;
  const char* levels[3];  // node (4 GPUs), rack (nodes), across racks
  const char* note;
};
// The paper's network (§4.3, §5): 4 GPUs per node over NVLink (~20 GB/s),
// 16 nodes per rack (~10 GB/s), racks over a director switch (~9.5 GB/s).
// The paper leaves open whether the network figures are per GPU or per node;
// `paper` gives every GPU its own link (S822LC nodes have two EDR ports, so
// ~10 GB/s per GPU means ~40 GB/s per node), `paper-node-links` one shared
// link per node. Latencies are ours (the paper gives none): 3, 5, 8 us.
// Both send a GPU's network traffic through its NVLink port first; on an
// S822LC the GPU-to-GPU NVLink is separate from the path to the InfiniBand
// adapters (behind the CPUs), which `paper-ports` models: the node level's
// links private, every GPU's own 10 GB/s port beside its 20 GB/s NVLink.
const preset presets[] = {
    {"paper", {"20GB/s:3us", "10GB/s:5us", "9.5GB/s:8us"}, "per-GPU links"},
    {"paper-node-links", {"20GB/s:3us", "10GB/s:5us:1", "9.5GB/s:8us:1"}, "one link per node (4 GPUs share it)"},
    {"paper-ports", {"20GB/s:3us:private", "10GB/s:5us", "9.5GB/s:8us"},
     "per-GPU links, the network reached beside NVLink, not through it"},
};

struct model_preset {
  const char* name;
  double grad_bytes;  // 0: the tensor list's own size
  double compute_s;   // one iteration on one GPU
  const char* note;
  const char* tensors;  // gradient-tensor list (bench/models/), scaled to grad_bytes
};
// Gradient sizes from the paper (§4.2, §5.1, §5.2). Compute per iteration is
// not in the paper; derived from it where possible (see paper-reproduction.md):
//   resnet50: Torch, 90 epochs of 1.28M images in 50 min on 256 GPUs at
//     batch 32 -> 0.213 s per iteration at 84% efficiency -> 0.179 s alone.
//   resnet50-caffe: 23 ms overhead at 95% efficiency -> 0.437 s alone.
//   resnet101-22k: batch 20 per GPU; assumed 0.45 s (ResNet-101 is ~1.9x
//     ResNet-50's work, at 20/32 of the batch, on IBM-Caffe).
// Tensor lists: ResNet-50's own 161 tensors (102.2 MB, the paper's "~100 MB");
// for ResNet-101 22K no list ships, so ResNet-50's is scaled to 350 MB (the header
// prints the factor). The real one's 22K-way classifier holds about half the
// bytes, and its gradient is the backward pass's first.
const model_preset models[] = {
    {"resnet50", 0, 0.179, "ResNet-50 1K, Torch, batch 32/GPU", "resnet50"},
    {"resnet50-caffe", 0, 0.437, "ResNet-50 1K, IBM-Caffe, batch 32/GPU", "resnet50"},
    {"resnet101-22k", 350e6, 0.45, "ResNet-101 22K, IBM-Caffe, batch 20/GPU", "resnet50"},
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "ddl-sim: %s\n"
               "usage: ddl-sim [--preset paper|paper-node-links|paper-ports | --topology SPEC] [--bytes N]\n"
               "               [--strategy all|auto|ring|recursive_doubling|halving_doubling|multi_ring|one_shot|two_shot]\n"
               "               [--chunk BYTES] [--shared-levels K] [--csv FILE]\n"
               "       ddl-sim --scaling [--preset ...] [--model resnet50|resnet50-caffe|resnet101-22k]\n"
               "               [--grad-bytes N] [--compute SECONDS] [--tensors resnet50|transformer|FILE.csv]\n"
               "               [--bucket BYTES] [--max-gpus N] [--shared-levels K] [--csv FILE] [--plot FILE.png]\n"
               "SPEC uses DDL_TOPOLOGY's syntax, e.g. 4:20GB/s:3us,16:10GB/s:5us,4:9.5GB/s:8us\n",
               why.c_str());
  std::exit(2);
}

double parse_number(const std::string& flag, const std::string& v) {
  // Accepts 350e6 or 350M (MiB) alike.
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end && *end == '\0' && d >= 0) return d;
  try {
    return static_cast<double>(ddl::detail::parse_bytes(flag.c_str(), v));
  } catch (const ddl::error& e) {
    usage(e.what());
  }
}

// A CSV field: plan names hold commas ("ring (flat, 16)", "order 0,2,1").
std::string field(std::string s) {
  for (char& c : s)
    if (c == ',') c = ';';
  return s;
}

long peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

struct outcome {
  double seconds = 0, wall = 0;
  ddl::sim_report rep;
};

// A phantom simulation of `topo` whose `shared` innermost levels share memory.
ddl::sim_options phantom_run(int shared) {
  ddl::sim_options o;
  o.phantom = true;
  o.shared_levels = shared;
  return o;
}

// What auto weighs on `fab`'s transport (the shared levels, as auto sees them).
ddl::plan_for allowed_on(ddl::sim_fabric& fab) {
  ddl::plan_for q = ddl::plan_for::transport<ddl::sim_transport>();
  fab.run([&](ddl::sim_transport& t) {
    if (t.rank() != 0) return;
    q = ddl::plan_for::transport(t);
    q.shared_levels = ddl::shared_levels(t, t.topology());
  });
  return q;
}

// One all-reduce of `bytes` (float32, phantom) with strategy `s`.
template <class Strategy>
outcome simulate(ddl::sim_fabric& f, const Strategy& s, double bytes, std::size_t chunk) {
  const std::size_t count = static_cast<std::size_t>(bytes) / 4;
  const auto t0 = std::chrono::steady_clock::now();
  outcome o;
  o.rep = f.run([&](ddl::sim_transport& t) {
    ddl::options opt = ddl::options::from_env();
    opt.chunk_bytes = chunk;
    ddl::communicator<Strategy, ddl::sim_transport> comm(t, s, opt);
    void* p = t.phantom_buffer(count * 4);
    comm.all_reduce(ddl::buffer_view{p, count, ddl::dtype::float32, {}}, ddl::op::sum);
  });
  o.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.seconds = o.rep.seconds;
  return o;
}

std::string level_name(const ddl::topology& t, int l) {
  char b[64];
  std::snprintf(b, sizeof b, "level %d (%d x %g GB/s)", l + 1, t[static_cast<std::size_t>(l)].extent,
                t[static_cast<std::size_t>(l)].bandwidth / 1e9);
  return b;
}

// The preset's levels for n GPUs: 4 per node, up to 16 nodes per rack, then racks.
ddl::topology scaled(const preset& p, int n) {
  std::string spec;
  const int node = std::min(n, 4);
  spec = std::to_string(node) + ":" + p.levels[0];
  if (n > 4) spec += "," + std::to_string(std::min(n / 4, 16)) + ":" + p.levels[1];
  if (n > 64) spec += "," + std::to_string(n / 64) + ":" + p.levels[2];
  return ddl::topology::parse(spec);
}

int run_strategies(const ddl::topology& topo, const std::string& which, double bytes, std::size_t chunk,
                   const std::string& csv, int shared) {
  ddl::sim_fabric fab(topo, phantom_run(shared));
  std::printf("# ddl-sim: all-reduce of %.0f bytes (float32, sum) on %s, %d ranks, chunk %zu bytes, %d shared-memory "
              "level(s)\n", bytes, topo.str().c_str(), topo.size(), chunk, shared);
  std::printf("# model = cost model (strategy/cost_model.hpp); sim = sim_transport running the strategy code\n");
  // What no algorithm reducing at the ranks beats on these links.
  const ddl::cost::floor_bound floor = ddl::cost::all_reduce_floor(topo.data(), topo.count(), bytes);
  std::string floor_links = level_name(topo, floor.level);
  for (int l = floor.level + 1; l <= floor.last; ++l) floor_links += " with " + level_name(topo, l);
  std::printf("# floor = bandwidth floor of any all-reduce, %.3f ms: %s, 2 (m-1) S out of its m units in all "
              "(cost::all_reduce_floor)\n", floor.seconds * 1e3, floor_links.c_str());
  std::printf("# %-34s %11s %11s %7s %7s  %-28s %-26s %9s %7s\n", "strategy", "model_ms", "sim_ms", "sim/mod",
              "sim/flr", "bound by", "busiest link (busy %)", "messages", "wall_s");
  std::FILE* out = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (!csv.empty() && !out) usage("cannot write " + csv);
  if (out) std::fprintf(out, "strategy,bytes,ranks,model_ms,sim_ms,bound_level,messages,wall_s,floor_ms\n");
  const ddl::plan_for allowed = allowed_on(fab);  // what auto weighs here
  const ddl::plan best = ddl::best_plan(topo, bytes, allowed);
  auto line = [&](const std::string& name, double model, const outcome& o, bool chosen) {
    const auto& b = o.rep.busiest;
    char busy[64];
    std::snprintf(busy, sizeof busy, "%s (%.0f%%)", b.str().c_str(), o.seconds > 0 ? 100 * b.busy_seconds / o.seconds : 0.0);
    std::printf("%s %-34s %11.3f %11.3f %7.3f %7.3f  %-28s %-26s %9zu %7.2f\n", chosen ? "*" : " ", name.c_str(),
                model * 1e3, o.seconds * 1e3, model > 0 ? o.seconds / model : 0.0,
                floor.seconds > 0 ? o.seconds / floor.seconds : 0.0, level_name(topo, o.rep.bound_level).c_str(),
                busy, o.rep.messages, o.wall);
    if (out)
      std::fprintf(out, "%s,%.0f,%d,%.6f,%.6f,%d,%zu,%.3f,%.6f\n", field(name).c_str(), bytes, topo.size(),
                   model * 1e3, o.seconds * 1e3, o.rep.bound_level + 1, o.rep.messages, o.wall, floor.seconds * 1e3);
    std::fflush(stdout);
  };
  bool any = false;
  for (const ddl::plan& p : ddl::all_plans(topo, bytes, allowed)) {
    const std::string name = ddl::describe(topo, p);
    const bool is_ring = p.algo == ddl::algorithm::multi_ring && p.dims == 1;
    bool take = which == "all";
    if (which == "ring") take = is_ring;
    if (which == "multi_ring") take = p.algo == ddl::algorithm::multi_ring && p.dims > 1;
    if (which == "recursive_doubling" || which == "halving_doubling" || which == "one_shot" || which == "two_shot")
      take = which == ddl::name_of(p.algo);
    if (!take) continue;
    any = true;
    const bool chosen = p.algo == best.algo && p.dims == best.dims && p.bounds == best.bounds && p.order == best.order &&
                        p.segments == best.segments && p.direct_first == best.direct_first;
    line(name, p.seconds, simulate(fab, ddl::planned(topo, p), bytes, chunk), chosen);
  }
  if (which == "auto" || which == "all") {
    any = true;
    line("auto -> " + ddl::describe(topo, best), best.seconds, simulate(fab, ddl::auto_strategy(topo), bytes, chunk),
         false);
  }
  if (!any && (which == "one_shot" || which == "two_shot"))
    usage(which + " runs only where one shared unit holds every rank (--shared-levels as many as the topology's levels)");
  if (!any) usage("unknown strategy '" + which + "'");
  std::printf("# planner's choice marked *; peak memory %ld MiB\n", peak_rss_mib());
  if (out) std::fclose(out);
  return 0;
}

// The gradients as the backward pass produces them: the tensor list scaled
// to `grad_bytes` (float32), each tensor's share of the backward compute
// in proportion to its backward FLOPs.
struct training_step {
  std::vector<std::size_t> elements;  // forward order
  std::vector<double> backward_s;     // forward order
  double forward_s = 0;
  std::size_t total = 0;
};

training_step make_step(const std::vector<ddl_bench::tensor_spec>& list, double grad_bytes, double compute_s) {
  double elems = 0;
  for (const auto& t : list) elems += static_cast<double>(t.elements);
  const std::vector<double> share = ddl_bench::backward_shares(list);
  const double scale = grad_bytes / 4 / elems;
  training_step st;
  // Forward 1/3 of the compute, backward 2/3 (backward costs about twice the forward).
  st.forward_s = compute_s / 3;
  for (std::size_t k = 0; k < list.size(); ++k) {
    st.elements.push_back(std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(static_cast<double>(list[k].elements) * scale))));
    st.backward_s.push_back(compute_s * 2 / 3 * share[k]);
    st.total += st.elements.back();
  }
  return st;
}

// One training step on every rank of `fab`: forward, then the backward pass
// marking each gradient ready (last layer first) into ddl's bucketer, then
// wait_all. Returns the slowest rank's step time and the bucket count.
std::pair<double, std::size_t> simulate_step(ddl::sim_fabric& fab, const training_step& st, std::size_t chunk,
                                             const ddl::bucket_options& bo) {
  std::size_t buckets_used = 0;
  const auto rep = fab.run([&](ddl::sim_transport& t) {
    ddl::options opt = ddl::options::from_env();
    opt.chunk_bytes = chunk;
    opt.async_progress = ddl::progress::thread;  // a progress fiber per rank
    using comm_t = ddl::communicator<ddl::auto_strategy, ddl::sim_transport>;
    comm_t comm(t, ddl::auto_strategy(fab.topology()), opt);
    auto* base = static_cast<float*>(t.phantom_buffer(st.total * 4));
    std::vector<ddl::buffer_view> grads;  // forward order, one flat buffer as frameworks lay them out
    for (std::size_t k = 0, off = 0; k < st.elements.size(); off += st.elements[k], ++k)
      grads.push_back(ddl::buffer_view{base + off, st.elements[k], ddl::dtype::float32, {}});
    ddl::bucketer<comm_t> buckets(comm, ddl::op::avg, bo);
    for (std::size_t k = grads.size(); k-- > 0;) buckets.add(grads[k]);
    t.compute(st.forward_s);
    for (std::size_t j = 0; j < grads.size(); ++j) {
      t.compute(st.backward_s[grads.size() - 1 - j]);
      buckets.mark_ready(j);
    }
    buckets.wait_all();
    if (t.rank() == 0) buckets_used = buckets.layout().size();
  });
  return {rep.seconds, buckets_used};
}

int run_scaling(const preset& pr, const model_preset& m, const std::string& tensors, int max_gpus, std::size_t chunk,
                const ddl::bucket_options& bo, const std::string& csv, const std::string& plot, int shared) {
  const auto list = ddl_bench::load_model(tensors);
  double list_bytes = 0;
  for (const auto& t : list) list_bytes += 4.0 * static_cast<double>(t.elements);
  const double grad_bytes = m.grad_bytes > 0 ? m.grad_bytes : list_bytes;
  const training_step step = make_step(list, grad_bytes, m.compute_s);
  const double bytes = 4.0 * static_cast<double>(step.total);
  std::printf("# ddl-sim --scaling: %s on the %s network (%s), %d shared-memory level(s)\n", m.note, pr.name, pr.note,
              shared);
  std::printf("# gradients %.0f bytes in %zu tensors (%s%s), compute %.3f s per iteration on one GPU\n", bytes,
              list.size(), tensors.c_str(),
              std::fabs(grad_bytes - list_bytes) > 1 ? (", sizes scaled x" + std::to_string(grad_bytes / list_bytes)).c_str()
                                                     : "",
              m.compute_s);
  std::printf("# no overlap: t = compute + one all-reduce of all gradients (simulated)\n");
  std::printf("# overlap: the step simulated: forward (compute/3), then the backward pass (2/3, each gradient's\n"
              "#   share by its FLOPs) marking gradients ready in ddl::bucketer (buckets %zu/%zu/%zu KiB first/rest/last),\n"
              "#   buckets all-reduced asynchronously on a progress fiber per rank, wait_all; exposed = t - compute\n",
              bo.first_bucket_bytes >> 10, bo.bucket_bytes >> 10, bo.last_bucket_bytes >> 10);
  std::printf("# efficiency = t(1 GPU) / t(n GPUs) (the paper's §3.1); speed-up = n x efficiency;\n"
              "# eff4 = t(4 GPUs) / t(n GPUs), the paper's figures' reference (one node)\n");
  std::printf("# %5s %-34s %-24s %10s %12s %7s %8s %7s %8s %7s %7s %8s %7s\n", "gpus", "topology", "plan", "comm_ms",
              "over_4gpu_ms", "eff", "speedup", "eff4", "buckets", "exposed_ms", "eff_ovl", "spd_ovl", "eff4_ovl");
  std::FILE* out = std::fopen(csv.c_str(), "w");
  if (!out) usage("cannot write " + csv);
  std::fprintf(out, "gpus,plan,comm_ms,overhead_vs_4_ms,efficiency,speedup,efficiency_overlap,speedup_overlap,"
                    "efficiency_vs_4,efficiency_vs_4_overlap,exposed_ms,buckets\n");
  double comm4 = 0, t4 = 0, t4_ovl = 0;
  for (int n = 1; n <= max_gpus; n *= 2) {
    double comm = 0, t_ovl = m.compute_s;
    std::size_t nbuckets = 0;
    std::string topo_s = "-", plan_s = "-";
    if (n > 1) {
      const ddl::topology topo = scaled(pr, n);
      ddl::sim_fabric fab(topo, phantom_run(std::min(shared, static_cast<int>(topo.count()))));  // small n: fewer levels
      const ddl::plan best = ddl::best_plan(topo, bytes, allowed_on(fab));
      comm = simulate(fab, ddl::auto_strategy(topo), bytes, chunk).seconds;
      std::tie(t_ovl, nbuckets) = simulate_step(fab, step, chunk, bo);
      topo_s = topo.str();
      plan_s = ddl::describe(topo, best);
    }
    const double t1 = m.compute_s;
    const double t_plain = m.compute_s + comm;
    if (n == 4) {
      comm4 = comm;
      t4 = t_plain;
      t4_ovl = t_ovl;
    }
    const double eff = t1 / t_plain, eff_o = t1 / t_ovl;
    // Below 4 GPUs there is no 4-GPU reference: "-" in the table, an empty CSV field (gnuplot skips it).
    auto vs4 = [n](double t_ref, double t, bool csv_field) {
      if (n < 4) return std::string(csv_field ? "" : "-");
      char b[32];
      std::snprintf(b, sizeof b, csv_field ? "%.5f" : "%.3f", t_ref / t);
      return std::string(b);
    };
    const double over = n >= 4 ? (comm - comm4) * 1e3 : 0.0;
    const double exposed = (t_ovl - m.compute_s) * 1e3;
    std::printf("  %5d %-34s %-24s %10.3f %12.3f %7.3f %8.1f %7s %8zu %10.3f %7.3f %8.1f %7s\n", n, topo_s.c_str(),
                plan_s.c_str(), comm * 1e3, over, eff, n * eff, vs4(t4, t_plain, false).c_str(), nbuckets, exposed,
                eff_o, n * eff_o, vs4(t4_ovl, t_ovl, false).c_str());
    std::fprintf(out, "%d,%s,%.6f,%.6f,%.5f,%.3f,%.5f,%.3f,%s,%s,%.6f,%zu\n", n, field(plan_s).c_str(), comm * 1e3,
                 over, eff, n * eff, eff_o, n * eff_o, vs4(t4, t_plain, true).c_str(),
                 vs4(t4_ovl, t_ovl, true).c_str(), exposed, nbuckets);
    std::fflush(stdout);
  }
  std::fclose(out);
  if (!plot.empty()) {
    const std::string gp = plot + ".gp";
    std::ofstream g(gp);
    g << "set terminal pngcairo size 900,420 font ',10'\nset output '" << plot << "'\n"
      << "set datafile separator ','\nset key top left\nset logscale x 2\nset grid\nset multiplot layout 1,2 title '"
      << m.note << " on the " << pr.name << " network (ddl-sim)'\n"
      << "set xlabel 'GPUs'\nset ylabel 'speed-up'\nset logscale y 2\n"
      << "plot '" << csv << "' skip 1 u 1:1 w l dt 2 lc 'gray' t 'linear', '' skip 1 u 1:6 w lp t 'no overlap', "
      << "'' skip 1 u 1:8 w lp t 'overlap (buckets)'\n"
      << "unset logscale y\nset ylabel 'scaling efficiency'\nset yrange [0.5:1.02]\nset key bottom left\n"
      << "plot '" << csv << "' skip 1 u 1:5 w lp lc 1 t 'no overlap (vs 1 GPU)', '' skip 1 u 1:7 w lp lc 2 t 'overlap (vs 1 GPU)', "
      << "'' skip 1 u 1:9 w lp dt 2 lc 1 t 'no overlap (vs 4 GPUs)', '' skip 1 u 1:10 w lp dt 2 lc 2 t 'overlap (vs 4 GPUs)'\n"
      << "unset multiplot\n";
    g.close();
    const std::string cmd = "gnuplot " + gp;
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "ddl-sim: gnuplot failed (is it installed?); %s kept\n", gp.c_str());
    else std::printf("# plot: %s\n", plot.c_str());
  }
  std::printf("# peak memory %ld MiB\n", peak_rss_mib());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string topo_spec, strategy = "all", csv, plot, preset_name = "paper", model_name = "resnet50", tensors;
  std::size_t bucket = 0;
  double bytes = 350e6, grad = -1, compute = -1;
  std::size_t chunk = std::size_t{1} << 20;
  int max_gpus = 256, shared = 0;
  bool scaling = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--topology") topo_spec = value();
    else if (a == "--preset") preset_name = value();
    else if (a == "--bytes") bytes = parse_number(a, value());
    else if (a == "--strategy") strategy = value();
    else if (a == "--chunk") chunk = static_cast<std::size_t>(parse_number(a, value()));
    else if (a == "--csv") csv = value();
    else if (a == "--plot") plot = value();
    else if (a == "--scaling") scaling = true;
    else if (a == "--model") model_name = value();
    else if (a == "--grad-bytes") grad = parse_number(a, value());
    else if (a == "--compute") compute = parse_number(a, value());
    else if (a == "--max-gpus") max_gpus = std::atoi(value().c_str());
    else if (a == "--tensors") tensors = value();
    else if (a == "--bucket") bucket = static_cast<std::size_t>(parse_number(a, value()));
    else if (a == "--shared-levels") shared = std::atoi(value().c_str());
    else if (a == "-h" || a == "--help") usage("help");
    else usage("unknown flag '" + a + "'");
  }
  if (chunk < 64) usage("--chunk must be at least 64 bytes");
  if (shared < 0) usage("--shared-levels must be 0 or more");
  const preset* pr = nullptr;
  for (const auto& p : presets)
    if (preset_name == p.name) pr = &p;
  if (!pr) usage("unknown preset '" + preset_name + "'");
  try {
    if (scaling) {
      const model_preset* mp = nullptr;
      for (const auto& m : models)
        if (model_name == m.name) mp = &m;
      if (!mp) usage("unknown model '" + model_name + "'");
      model_preset m = *mp;
      if (grad >= 0) m.grad_bytes = grad;
      if (compute >= 0) m.compute_s = compute;
      if (max_gpus < 1 || (max_gpus > 64 && max_gpus % 64) || max_gpus > 8 * 4096) usage("--max-gpus must be a power of two up to 32768");
      ddl::bucket_options bo = ddl::bucket_options::from_env();
      if (bucket) {
        bo.bucket_bytes = bucket;
        bo.first_bucket_bytes = std::min(bo.first_bucket_bytes, bucket);
        bo.last_bucket_bytes = std::min(bo.last_bucket_bytes, bucket);
      }
      return run_scaling(*pr, m, tensors.empty() ? m.tensors : tensors, max_gpus, chunk, bo,
                         csv.empty() ? "ddl-sim-scaling.csv" : csv, plot, shared);
    }
    const ddl::topology topo = topo_spec.empty() ? scaled(*pr, 256) : ddl::topology::parse(topo_spec, "--topology");
    if (topo_spec.empty()) std::printf("# preset %s: %s\n", pr->name, pr->note);
    return run_strategies(topo, strategy, bytes, chunk, csv, shared);
  } catch (const ddl::error& e) {
    std::fprintf(stderr, "ddl-sim: %s\n", e.what());
    return 1;
  }
}
