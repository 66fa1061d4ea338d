// oneDNN primitives of the CPU runner (onednn_ops.h).
#include "gpu/onednn_ops.h"

#include <algorithm>

namespace tpusim::gpu {

void OneDnnOp::run(dnnl::stream& strm) {
  prim.execute(strm, args);
  strm.wait();
}

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::memory reordered(const dnnl::engine& eng, dnnl::stream& strm, const dnnl::memory::desc& plain,
                       const int8_t* data, const dnnl::memory::desc& want) {
  dnnl::memory user(plain, eng, const_cast<int8_t*>(data)), w(want, eng);
  dnnl::reorder(user, w).execute(strm, user, w);
  strm.wait();
  return w;
}

}  // namespace

OneDnnOp onednn_matmul(const dnnl::engine& eng, dnnl::stream& strm, const MatmulStep& s, int8_t* x,
                       int32_t* c) {
  const int64_t m = int64_t(s.m), k = int64_t(s.k_pad), n = int64_t(s.n_pad);
  const dnnl::memory::desc src_md({m, k}, dt::s8, tag::ab), dst_md({m, n}, dt::s32, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, {{k, n}, dt::s8, tag::any}, dst_md), eng);
  // W[n][k] is the {k, n} matrix in "ba" order (k fastest).
  const dnnl::memory w = reordered(eng, strm, {{k, n}, dt::s8, tag::ba}, s.weights.data(), pd.weights_desc());
  return {dnnl::matmul(pd),
          {{DNNL_ARG_SRC, dnnl::memory(src_md, eng, x)},
           {DNNL_ARG_WEIGHTS, w},
           {DNNL_ARG_DST, dnnl::memory(dst_md, eng, c)}}};
}

// The plan's weight row j holds output channel j's weights in (r, q, channel) order, i.e. OHWI.
OneDnnOp onednn_conv(const dnnl::engine& eng, dnnl::stream& strm, const MatmulStep& s, uint64_t batch,
                     int8_t* input, int32_t* c) {
  const Im2colGeometry& g = s.gather;
  const int64_t ch = int64_t(g.input[0].c), kw = int64_t(g.kernel_w), kh = int64_t(g.k) / ch / kw;
  const int64_t ih = int64_t(g.in_h), iw = int64_t(g.in_w), ow = int64_t(g.out_w),
                oh = int64_t(g.out_pixels / g.out_w);
  const int64_t st = int64_t(g.stride), pad = int64_t(g.pad), n = int64_t(s.n), b = int64_t(batch);
  const dnnl::memory::desc src({b, ch, ih, iw}, dt::s8, tag::nhwc), dst({b, n, oh, ow}, dt::s32, tag::nhwc);
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::convolution_direct, src,
                                          {{n, ch, kh, kw}, dt::s8, tag::any}, dst, {st, st}, {pad, pad},
                                          {(oh - 1) * st + kh - ih - pad, (ow - 1) * st + kw - iw - pad});
  const dnnl::convolution_forward::primitive_desc pd(d, eng);
  std::vector<int8_t> ohwi(s.n * s.k);
  for (uint64_t j = 0; j < s.n; ++j) std::copy_n(&s.weights[j * s.k_pad], s.k, &ohwi[j * s.k]);
  const dnnl::memory w =
      reordered(eng, strm, {{n, ch, kh, kw}, dt::s8, tag::ohwi}, ohwi.data(), pd.weights_desc());
  return {dnnl::convolution_forward(pd),
          {{DNNL_ARG_SRC, dnnl::memory(src, eng, input)},
           {DNNL_ARG_WEIGHTS, w},
           {DNNL_ARG_DST, dnnl::memory(dst, eng, c)}}};
}

OneDnnOp onednn_max_pool(const dnnl::engine& eng, const PoolStep& p, uint64_t batch, int8_t* input,
                         int8_t* output) {
  const int64_t b = int64_t(batch), c = int64_t(p.c), win = int64_t(p.window), st = int64_t(p.stride);
  const dnnl::memory::desc src({b, c, int64_t(p.in_h), int64_t(p.in_w)}, dt::s8, tag::nhwc);
  const dnnl::memory::desc dst({b, c, int64_t(p.out_h), int64_t(p.out_w)}, dt::s8, tag::nhwc);
  const dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src,
                                      dst, {st, st}, {win, win}, {0, 0}, {0, 0});
  const dnnl::pooling_forward::primitive_desc pd(d, eng);
  return {dnnl::pooling_forward(pd),
          {{DNNL_ARG_SRC, dnnl::memory(src, eng, input)}, {DNNL_ARG_DST, dnnl::memory(dst, eng, output)}}};
}

}  // namespace tpusim::gpu
