// cpu_runner_bench [--quick] [--json FILE]: the CPU reference runner (gpu/cpu_model.h) against
// oneDNN's own int8 inference of the same layers.
//
// For each model: the runner's time per batch (gathers, oneDNN matmuls, requantization, pools:
// everything tpusim-cpu times), and the time of oneDNN running the same layers its own way
// (OneDnnNetwork below: convolution, matmul and pooling primitives with oneDNN's own int8
// requantization, which rounds differently, hence not bit-exact), back to back, inputs in place.
// Both on the same threads (every CPU the process may use, or TPUSIM_BENCH_THREADS), interleaved
// batch by batch in the same process (each side first in every other pair), each batch timed alone;
// at least 15 batches a side, about a CPU second each (0.2 with --quick). The figure compared is the
// median batch of each side, in CPU time of the thread when one thread runs (on a shared machine
// wall-clock time counts the neighbours' jobs: a 0.4 ms matmul measured 8 ms when descheduled), in
// wall-clock time otherwise; the wall-clock ratio is printed beside it, with the load average.
// Prints the ratio runner / oneDNN (target: at most 2; "BELOW TARGET" marks a miss, the exit code
// does not). Exit 1 when the runner's output differs from the golden reference, 2 on bad arguments.
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <dnnl.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <variant>

#include "bench/bench_common.h"
#include "compiler/compile.h"
#include "compiler/reference.h"
#include "gpu/cpu_model.h"
#include "gpu/plan.h"

namespace {

using Clock = std::chrono::steady_clock;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
constexpr double kTarget = 2.0;

// One batch's wall-clock time and the CPU time of the calling thread (with one thread, all of the
// batch's work: the time a busy machine's other jobs take the CPU away is not in it).
struct Sample {
  double wall = 0, cpu = 0;
  Sample operator+(const Sample& o) const { return {wall + o.wall, cpu + o.cpu}; }
};
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
template <typename F>
Sample time_one(F&& f) {
  const double c0 = thread_cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  f();
  return {std::chrono::duration<double>(Clock::now() - t0).count(), thread_cpu_seconds() - c0};
}
std::array<double, 3> load_average() {
  std::array<double, 3> l{};
  if (getloadavg(l.data(), 3) != 3) l = {};
  return l;
}

// The same layers as oneDNN's own int8 inference would run them: a convolution primitive per
// convolution (NHWC, s8 in and out, per-channel output scales: oneDNN's requantization), a matmul
// primitive with s8 output and scales per dense layer, a pooling primitive per pool; weights in
// oneDNN's preferred layouts, reordered once. Element-wise steps (LSTM cells, residual adds) and
// matmuls over several inputs have no counterpart here: models with them are not benchmarked.
class OneDnnNetwork {
 public:
  explicit OneDnnNetwork(const tpusim::gpu::GpuPlan& plan) {
    for (uint64_t bytes : plan.tensor_bytes) tensors_.emplace_back(bytes, int8_t{1});
    for (const tpusim::gpu::Step& s : plan.steps) {
      if (const auto* m = std::get_if<tpusim::gpu::MatmulStep>(&s)) add(*m, plan.batch);
      else if (const auto* p = std::get_if<tpusim::gpu::PoolStep>(&s)) add(*p, plan.batch);
      else throw std::runtime_error("an element-wise step: no oneDNN counterpart in this benchmark");
    }
  }
  void run() {
    for (Op& op : ops_) op.prim.execute(strm_, op.args);
    strm_.wait();
  }

 private:
  struct Op {
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;
  };
  dnnl::memory wrap(const dnnl::memory::desc& md, int tensor) {
    return dnnl::memory(md, eng_, tensors_[size_t(tensor)].data());
  }
  dnnl::memory weights_for(const dnnl::memory::desc& want, const dnnl::memory::desc& plain) {
    dnnl::memory user(plain, eng_), w(want, eng_);
    std::fill_n(static_cast<int8_t*>(user.get_data_handle()), plain.get_size(), int8_t{3});
    dnnl::reorder(user, w).execute(strm_, user, w);
    strm_.wait();
    return w;
  }
  static std::vector<float> scales(const tpusim::gpu::MatmulStep& m) {
    std::vector<float> v;
    for (const auto& q : m.columns) v.push_back(float(std::ldexp(double(q.mult), -int(q.shift))));
    return v;
  }
  void add(const tpusim::gpu::MatmulStep& m, uint64_t batch) {
    if (m.gather.inputs != 1) throw std::runtime_error("a matmul over several inputs: not benchmarked");
    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, scales(m));
    const tpusim::gpu::Im2colGeometry& g = m.gather;
    if (g.conv) {
      const int64_t c = int64_t(g.input[0].c), kw = int64_t(g.kernel_w),
                    kh = int64_t(g.k / g.input[0].c / g.kernel_w);
      const int64_t ih = int64_t(g.in_h), iw = int64_t(g.in_w), ow = int64_t(g.out_w);
      const int64_t oh = int64_t(g.out_pixels / g.out_w), st = int64_t(g.stride), pad = int64_t(g.pad);
      const int64_t n = int64_t(m.n), b = int64_t(batch);
      const dnnl::memory::desc src({b, c, ih, iw}, dt::s8, tag::nhwc), dst({b, n, oh, ow}, dt::s8, tag::nhwc);
      const dnnl::memory::desc any({n, c, kh, kw}, dt::s8, tag::any);
      const dnnl::convolution_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, any, dst, {st, st},
          {pad, pad}, {(oh - 1) * st + kh - ih - pad, (ow - 1) * st + kw - iw - pad});
      const dnnl::convolution_forward::primitive_desc pd(d, attr, eng_);
      const dnnl::memory w = weights_for(pd.weights_desc(), {{n, c, kh, kw}, dt::s8, tag::ohwi});
      ops_.push_back({dnnl::convolution_forward(pd),
                      {{DNNL_ARG_SRC, wrap(pd.src_desc(), m.input_tensor[0])},
                       {DNNL_ARG_WEIGHTS, w},
                       {DNNL_ARG_DST, wrap(pd.dst_desc(), m.output_tensor)}}});
      return;
    }
    const int64_t rows = int64_t(m.m), k = int64_t(m.k), n = int64_t(m.n);
    const dnnl::memory::desc src({rows, k}, dt::s8, tag::ab), dst({rows, n}, dt::s8, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, {{k, n}, dt::s8, tag::any}, dst), attr,
                                          eng_);
    const dnnl::memory w = weights_for(pd.weights_desc(), {{k, n}, dt::s8, tag::ab});
    ops_.push_back({dnnl::matmul(pd),
                    {{DNNL_ARG_SRC, wrap(src, m.input_tensor[0])},
                     {DNNL_ARG_WEIGHTS, w},
                     {DNNL_ARG_DST, wrap(dst, m.output_tensor)}}});
  }
  void add(const tpusim::gpu::PoolStep& p, uint64_t batch) {
    const int64_t b = int64_t(batch), c = int64_t(p.c), win = int64_t(p.window), st = int64_t(p.stride);
    const dnnl::memory::desc src({b, c, int64_t(p.in_h), int64_t(p.in_w)}, dt::s8, tag::nhwc);
    const dnnl::memory::desc dst({b, c, int64_t(p.out_h), int64_t(p.out_w)}, dt::s8, tag::nhwc);
    const dnnl::pooling_forward::desc d(
        dnnl::prop_kind::forward_inference,
        p.avg ? dnnl::algorithm::pooling_avg_exclude_padding : dnnl::algorithm::pooling_max, src, dst,
        {st, st}, {win, win}, {0, 0}, {0, 0});
    const dnnl::pooling_forward::primitive_desc pd(d, eng_);
    ops_.push_back({dnnl::pooling_forward(pd),
                    {{DNNL_ARG_SRC, wrap(src, p.input_tensor)}, {DNNL_ARG_DST, wrap(dst, p.output_tensor)}}});
  }
  dnnl::engine eng_{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm_{eng_};
  std::vector<std::vector<int8_t>> tensors_;
  std::vector<Op> ops_;
};

}  // namespace

int main(int argc, char** argv) {
  tpusim::bench::BenchArgs args;
  if (!tpusim::bench::parse_bench_args(argc, argv, args)) {
    fmt::print(stderr, "usage: cpu_runner_bench [--quick] [--json FILE]\n");
    return 2;
  }
  struct Model {
    const char* path;
    uint64_t batch;
  };
  std::vector<Model> models = {{"workloads/small/mnist_mlp.toml", 16},
                               {"workloads/small/tiny_cnn.toml", 8},
                               {"workloads/small/lenet5.toml", 8}};
  if (!args.quick) {
    models.push_back({"workloads/tpu-v1/mlp0.toml", 200});
    models.push_back({"workloads/tpu-v1/mlp1.toml", 168});
    models.push_back({"workloads/tpu-v1/cnn0.toml", 8});
  }
  const char* env_threads = std::getenv("TPUSIM_BENCH_THREADS");
  const int threads = env_threads ? std::max(1, std::atoi(env_threads)) : tpusim::gpu::usable_cpus();
  // CPU seconds of each side per model (about; at least kMinBatches batches each): the batches
  // are interleaved, runner and oneDNN alternately first, so the machine's load hits both alike.
  const double budget = args.quick ? 0.2 : 1.0;
  constexpr int kMinBatches = 15, kMaxBatches = 4000;
  const std::array<double, 3> load0 = load_average();
  fmt::print(
      "CPU runner vs oneDNN's own int8 layers on the same shapes: {}, {} thread{}, load average {:.2f} "
      "{:.2f} "
      "{:.2f}\n"
      "the median batch of each, interleaved; ratio = runner / oneDNN in {} (wall-clock ratio beside)\n",
      tpusim::bench::cpu_model(), threads, threads == 1 ? "" : "s", load0[0], load0[1], load0[2],
      threads == 1 ? "CPU time of the thread (what the machine's load cannot inflate)" : "wall-clock time");
  fmt::print("{:<12} {:>6} {:>8} {:>12} {:>12} {:>7} {:>7}  {}\n", "model", "batch", "batches", "runner ms",
             "oneDNN ms", "ratio", "wall", "");
  nlohmann::json out = {{"cpu", tpusim::bench::cpu_model()},
                        {"threads", threads},
                        {"target_max_ratio", kTarget},
                        {"ratio_clock", threads == 1 ? "thread_cpu_time" : "wall"},
                        {"load_average_start", load0}};
  bool exact = true;
  for (const Model& m : models) {
    tpusim::compiler::LoadOptions lo;
    lo.batch = m.batch;
    const tpusim::compiler::QGraph graph =
        tpusim::compiler::prepare_file(std::string(TPUSIM_SOURCE_DIR) + "/" + m.path, lo).graph;
    const tpusim::gpu::GpuPlan plan = tpusim::gpu::make_plan(graph);
    tpusim::gpu::CpuModel runner(plan, threads);
    if (runner.infer() != tpusim::compiler::run_golden(graph)[size_t(graph.output)]) {
      fmt::print("{}: the runner's output DIFFERS from the golden reference\n", graph.name);
      exact = false;
    }
    OneDnnNetwork onednn(plan);
    // Warm-up (a few batches each), which also sizes the run.
    Sample warm{};
    for (int i = 0; i < 3; ++i) warm = time_one([&] { runner.infer(); }) + time_one([&] { onednn.run(); });
    const int batches =
        int(std::clamp(budget / std::max(1e-9, warm.cpu), double(kMinBatches), double(kMaxBatches)));
    std::vector<double> ours_cpu, theirs_cpu, ours_wall, theirs_wall;
    for (int i = 0; i < batches; ++i) {
      Sample a, b;
      if (i % 2) {
        a = time_one([&] { runner.infer(); });
        b = time_one([&] { onednn.run(); });
      } else {
        b = time_one([&] { onednn.run(); });
        a = time_one([&] { runner.infer(); });
      }
      ours_cpu.push_back(a.cpu), theirs_cpu.push_back(b.cpu);
      ours_wall.push_back(a.wall), theirs_wall.push_back(b.wall);
    }
    using tpusim::bench::median;
    const double wall_ratio = median(ours_wall) / median(theirs_wall);
    const double a = threads == 1 ? median(ours_cpu) : median(ours_wall);
    const double b = threads == 1 ? median(theirs_cpu) : median(theirs_wall);
    fmt::print("{:<12} {:>6} {:>8} {:>12.4f} {:>12.4f} {:>7.2f} {:>7.2f}  {}\n", graph.name, graph.batch,
               batches, a * 1e3, b * 1e3, a / b, wall_ratio, a / b <= kTarget ? "within 2x" : "BELOW TARGET");
    out["models"].push_back({{"workload", graph.name},
                             {"batch", graph.batch},
                             {"macs", plan.macs},
                             {"batches", batches},
                             {"runner_seconds", a},
                             {"onednn_seconds", b},
                             {"ratio", a / b},
                             {"runner_wall_seconds", median(ours_wall)},
                             {"onednn_wall_seconds", median(theirs_wall)},
                             {"wall_ratio", wall_ratio}});
  }
  const std::array<double, 3> load1 = load_average();
  out["load_average_end"] = load1;
  fmt::print("load average at the end {:.2f} {:.2f} {:.2f}\n", load1[0], load1[1], load1[2]);
  if (!args.json.empty()) std::ofstream(args.json) << out.dump(2) << "\n";
  return exact ? 0 : 1;
}
