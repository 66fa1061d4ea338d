// cpu_runner_bench [--quick] [--json FILE]: the CPU reference runner (gpu/cpu_model.h) against
// oneDNN's own int8 inference of the same layers.
//
// For each model: the runner's time per batch (gathers, oneDNN matmuls, requantization, pools:
// everything tpusim-cpu times), and the time of oneDNN running the same layers its own way
// (OneDnnNetwork below: convolution, matmul and pooling primitives with oneDNN's own int8
// requantization, which rounds differently, hence not bit-exact), back to back, inputs in place.
// Both on the same threads (every CPU the process may use, or TPUSIM_BENCH_THREADS), interleaved
// batch by batch in the same process, each batch timed alone: the median batch of several rounds
// (on a shared machine a preempted batch measures the neighbours; the median leaves those out). Prints the
// ratio runner / oneDNN (target: at most 2; "BELOW TARGET" marks a miss, the exit code does not). Exit 1 when
// the runner's output differs from the golden reference, 2 on bad arguments.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
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

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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
  const int rounds = args.quick ? 5 : 9;
  fmt::print(
      "CPU runner vs oneDNN's own int8 layers on the same shapes: {}, {} threads, the median batch of {} "
      "rounds\n",
      tpusim::bench::cpu_model(), threads, rounds);
  fmt::print("{:<12} {:>6} {:>12} {:>12} {:>7}  {}\n", "model", "batch", "runner ms", "oneDNN ms", "ratio",
             "");
  nlohmann::json out = {
      {"cpu", tpusim::bench::cpu_model()}, {"threads", threads}, {"target_max_ratio", kTarget}};
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
    // About 0.5 G MACs a round (0.1 G with --quick), 1 to 200 batches.
    const double round_macs = args.quick ? 1e8 : 5e8;
    const int iterations = int(std::clamp(round_macs / std::max(1.0, double(plan.macs)), 1.0, 200.0));
    std::vector<double> ours, theirs;
    for (int r = 0; r < rounds + 1; ++r)  // round 0 warms up
      for (int i = 0; i < iterations; ++i) {
        Clock::time_point t0 = Clock::now();
        runner.infer();
        const double a = since(t0);
        t0 = Clock::now();
        onednn.run();
        const double b = since(t0);
        if (r) ours.push_back(a), theirs.push_back(b);
      }
    // The median single batch of each: on a shared machine the batches that were preempted measure
    // the neighbours, and the median leaves them out.
    const double a = tpusim::bench::median(ours), b = tpusim::bench::median(theirs);
    fmt::print("{:<12} {:>6} {:>12.4f} {:>12.4f} {:>7.2f}  {}\n", graph.name, graph.batch, a * 1e3, b * 1e3,
               a / b, a / b <= kTarget ? "within 2x" : "BELOW TARGET");
    out["models"].push_back({{"workload", graph.name},
                             {"batch", graph.batch},
                             {"macs", plan.macs},
                             {"runner_seconds", a},
                             {"onednn_seconds", b},
                             {"ratio", a / b}});
  }
  if (!args.json.empty()) std::ofstream(args.json) << out.dump(2) << "\n";
  return exact ? 0 : 1;
}
