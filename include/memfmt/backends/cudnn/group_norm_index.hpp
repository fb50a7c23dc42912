// memfmt/backends/cudnn/group_norm_index.hpp - the index, partition and arithmetic of the cuDNN
// backend's group norm kernels (cuda_group_norm.cuh), as plain C++ (MEMFMT_HOST_DEVICE) so that
// the CPU tests replay every block and thread of a launch against the reference backend.
//
// A packed tensor is (N, C, S positions), element (n, c, s) at ((n * C + c) * S + s) channels-first
// and ((n * S + s) * C + c) channels-last. Both passes reduce per (sample, channel) over positions
// first: a block takes a tile of channels of one sample and one chunk of positions, its threads
// laid out so that a warp reads consecutive addresses in either format (32 channels of a position
// channels-last, 32 positions of a channel channels-first). The partial results, one per (n, chunk,
// c), are then merged in a fixed order per (n, group) and per channel, so results are
// deterministic (no atomics). The statistics are Welford moments merged pairwise (Chan et al.), so
// a large mean costs no precision; the backward sums dy and dy * xhat with xhat from the saved
// statistics, never x itself.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../config.hpp"

namespace memfmt::cudnn::gn {

// The problem: N samples of C channels over S positions, C divisible by groups.
struct shape {
  std::int64_t n = 0, c = 0, s = 1, groups = 1;
};

MEMFMT_HOST_DEVICE std::int64_t per_group(const shape& p) { return p.c / p.groups; }
MEMFMT_HOST_DEVICE std::int64_t numel(const shape& p) { return p.n * p.c * p.s; }

MEMFMT_HOST_DEVICE std::int64_t offset(bool channels_last, const shape& p, std::int64_t n, std::int64_t c,
                                       std::int64_t s) {
  return channels_last ? (n * p.s + s) * p.c + c : (n * p.c + c) * p.s + s;
}

struct position {
  std::int64_t n = 0, c = 0, s = 0;
};

// The element at memory index j of a packed tensor: elementwise kernels walk their output in
// memory order.
MEMFMT_HOST_DEVICE position position_at(bool channels_last, const shape& p, std::int64_t j) {
  position q;
  if (channels_last) {
    q.c = j % p.c;
    const std::int64_t r = j / p.c;
    q.s = r % p.s;
    q.n = r / p.s;
  } else {
    q.s = j % p.s;
    const std::int64_t r = j / p.s;
    q.c = r % p.c;
    q.n = r / p.c;
  }
  return q;
}

// The (n, group) statistics index of a channel of sample n: n * groups + c / (C / groups).
MEMFMT_HOST_DEVICE std::int64_t stat_index(const shape& p, std::int64_t n, std::int64_t c) {
  return n * p.groups + c / per_group(p);
}

// An x with no elements (N, C or S zero) launches no kernel: a zero-size grid is a CUDA launch
// error and a reduce plan needs n, c, s >= 1. Its forward writes nothing (no statistics: the
// backward of an empty x reads none); its backward writes only dgamma and dbeta: C zeros each
// (param_grad_zeros), every one a sum over no elements.
MEMFMT_HOST_DEVICE bool launches(const shape& p) { return p.n > 0 && p.c > 0 && p.s > 0; }
MEMFMT_HOST_DEVICE std::int64_t param_grad_zeros(const shape& p) { return launches(p) ? 0 : p.c; }

// ------------------------------------------------------------------ the reduction partition

inline constexpr int block_threads = 256;

// A block's threads: `channels` channels of a tile times `lanes` threads along positions.
struct tiling {
  int channels = 0, lanes = 0;
};
MEMFMT_HOST_DEVICE tiling tiling_for(bool channels_last) {
  return channels_last ? tiling{32, block_threads / 32} : tiling{block_threads / 32, 32};
}

// A thread's channel in the tile and its lane along positions. Channels-last, consecutive threads
// take consecutive channels; channels-first, consecutive positions.
struct lane {
  int channel = 0, row = 0;
};
MEMFMT_HOST_DEVICE lane lane_of(bool channels_last, int thread) {
  const tiling t = tiling_for(channels_last);
  return channels_last ? lane{thread % t.channels, thread / t.channels} : lane{thread / t.lanes, thread % t.lanes};
}
// A thread's slot in the block's shared arrays (row-major over lanes, then channels).
MEMFMT_HOST_DEVICE int slot(bool channels_last, lane l) {
  return l.row * tiling_for(channels_last).channels + l.channel;
}

struct reduce_plan {
  shape sh;
  bool channels_last = false;  // of the tensor whose layout the blocks follow (x)
  std::int64_t channel_tiles = 0, chunks = 0, chunk_len = 0;
};
MEMFMT_HOST_DEVICE std::int64_t blocks(const reduce_plan& p) { return p.sh.n * p.channel_tiles * p.chunks; }
MEMFMT_HOST_DEVICE std::int64_t partials(const reduce_plan& p) { return p.sh.n * p.chunks * p.sh.c; }

// Enough blocks to fill a large GPU; positions are split into chunks only as far as that needs
// and each lane keeps at least min_rows_per_lane positions of a chunk.
inline constexpr std::int64_t target_blocks = 1024;
inline constexpr std::int64_t min_rows_per_lane = 8;

MEMFMT_HOST_DEVICE std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Needs n, c, s >= 1 (launches(sh)).
MEMFMT_HOST_DEVICE reduce_plan make_reduce_plan(const shape& sh, bool channels_last) {
  const tiling t = tiling_for(channels_last);
  reduce_plan p;
  p.sh = sh;
  p.channel_tiles = ceil_div(sh.c, t.channels);
  p.channels_last = channels_last;
  const std::int64_t base = sh.n * p.channel_tiles;
  const std::int64_t want = base >= target_blocks ? 1 : ceil_div(target_blocks, base);
  const std::int64_t most = ceil_div(sh.s, t.lanes * min_rows_per_lane);
  const std::int64_t chunks = want < most ? want : most;
  p.chunk_len = ceil_div(sh.s, chunks);
  p.chunks = ceil_div(sh.s, p.chunk_len);  // no empty chunk
  return p;
}

struct block_origin {
  std::int64_t n = 0, tile = 0, chunk = 0;
};
MEMFMT_HOST_DEVICE block_origin block_at(const reduce_plan& p, std::int64_t block) {
  block_origin o;
  o.chunk = block % p.chunks;
  const std::int64_t r = block / p.chunks;
  o.tile = r % p.channel_tiles;
  o.n = r / p.channel_tiles;
  return o;
}
// The channel a thread reduces; C or more: the thread is idle (a partial tile).
MEMFMT_HOST_DEVICE std::int64_t channel_of(const reduce_plan& p, const block_origin& o, lane l) {
  return o.tile * tiling_for(p.channels_last).channels + l.channel;
}
MEMFMT_HOST_DEVICE std::int64_t chunk_begin(const reduce_plan& p, std::int64_t chunk) { return chunk * p.chunk_len; }
MEMFMT_HOST_DEVICE std::int64_t chunk_end(const reduce_plan& p, std::int64_t chunk) {
  const std::int64_t e = (chunk + 1) * p.chunk_len;
  return e < p.sh.s ? e : p.sh.s;
}
// Where the partial result of (n, chunk, c) goes.
MEMFMT_HOST_DEVICE std::int64_t partial_index(const reduce_plan& p, std::int64_t n, std::int64_t chunk,
                                              std::int64_t c) {
  return (n * p.chunks + chunk) * p.sh.c + c;
}

// Calls fn(s) for the positions thread `l` of block `o` visits: its chunk, strided by the lanes.
template <class Fn>
MEMFMT_HOST_DEVICE void for_each_position(const reduce_plan& p, const block_origin& o, lane l, Fn&& fn) {
  const std::int64_t lanes = tiling_for(p.channels_last).lanes, end = chunk_end(p, o.chunk);
  for (std::int64_t s = chunk_begin(p, o.chunk) + l.row; s < end; s += lanes) fn(s);
}

// One step of a block's tree reduction over the lanes of each channel: rows below `stride` take
// in the row `stride` above. Steps run for stride = lanes / 2, ..., 1, with a barrier between.
template <class V, class Combine>
MEMFMT_HOST_DEVICE void tree_step(V* slots, bool channels_last, int thread, int stride, Combine combine) {
  const lane l = lane_of(channels_last, thread);
  if (l.row < stride) {
    V& mine = slots[slot(channels_last, l)];
    mine = combine(mine, slots[slot(channels_last, lane{l.channel, l.row + stride})]);
  }
}

// ------------------------------------------------------------------ the other kernels' partition

// Elementwise kernels (normalize, dx) walk their output in memory order with a grid-stride loop
// of at most max_elementwise_blocks blocks.
inline constexpr std::int64_t max_elementwise_blocks = 4096;
MEMFMT_HOST_DEVICE std::int64_t elementwise_blocks(std::int64_t total) {
  const std::int64_t b = ceil_div(total, block_threads);
  return b < max_elementwise_blocks ? b : max_elementwise_blocks;
}
template <class Fn>
MEMFMT_HOST_DEVICE void for_each_element(std::int64_t total, std::int64_t grid, std::int64_t block, int thread,
                                         Fn&& fn) {
  for (std::int64_t j = block * block_threads + thread; j < total; j += grid * block_threads) fn(j);
}
// The merge kernels take one item (an (n, group) or a channel) per thread.
MEMFMT_HOST_DEVICE std::int64_t item_blocks(std::int64_t items) { return ceil_div(items, block_threads); }
MEMFMT_HOST_DEVICE std::int64_t item_of(std::int64_t block, int thread) { return block * block_threads + thread; }

// ------------------------------------------------------------------ the arithmetic (A: float or double)

template <class A>
struct moments {
  std::int64_t count = 0;
  A mean = 0, m2 = 0;  // m2: the sum of squared deviations from the mean
};

template <class A>
MEMFMT_HOST_DEVICE void push(moments<A>& m, A v) {
  ++m.count;
  const A d = v - m.mean;
  m.mean += d / static_cast<A>(m.count);
  m.m2 += d * (v - m.mean);
}

struct merge_moments {
  template <class A>
  MEMFMT_HOST_DEVICE moments<A> operator()(const moments<A>& a, const moments<A>& b) const {
    if (b.count == 0) return a;
    if (a.count == 0) return b;
    moments<A> r;
    r.count = a.count + b.count;
    const A d = b.mean - a.mean, total = static_cast<A>(r.count);
    const A wb = static_cast<A>(b.count) / total;
    r.mean = a.mean + d * wb;
    r.m2 = a.m2 + b.m2 + d * d * static_cast<A>(a.count) * wb;
    return r;
  }
};

// Sums of dy and of dy * xhat.
template <class A>
struct grad_sums {
  A dy = 0, dy_xhat = 0;
};

struct add_sums {
  template <class A>
  MEMFMT_HOST_DEVICE grad_sums<A> operator()(const grad_sums<A>& a, const grad_sums<A>& b) const {
    return {a.dy + b.dy, a.dy_xhat + b.dy_xhat};
  }
};

template <class A>
struct group_stats {
  A mean = 0, invstd = 0;
};

// The statistics of (n, g) = i / groups, i % groups from the forward's partial moments: channels
// of the group in order, each over its chunks in order.
template <class A>
MEMFMT_HOST_DEVICE group_stats<A> merge_group(const reduce_plan& p, const moments<A>* part, std::int64_t i,
                                              double epsilon) {
  const std::int64_t n = i / p.sh.groups, g = i % p.sh.groups, per = per_group(p.sh);
  moments<A> m;
  for (std::int64_t c = g * per; c < (g + 1) * per; ++c)
    for (std::int64_t k = 0; k < p.chunks; ++k) m = merge_moments{}(m, part[partial_index(p, n, k, c)]);
  using std::sqrt;
  group_stats<A> r;
  r.mean = m.mean;
  r.invstd = static_cast<A>(1) / sqrt(m.m2 / static_cast<A>(m.count) + static_cast<A>(epsilon));
  return r;
}

// The backward's per-(n, g) sums sum(g) and sum(g xhat), g = dy * gamma[c].
template <class A>
MEMFMT_HOST_DEVICE grad_sums<A> merge_group_grads(const reduce_plan& p, const grad_sums<A>* part, const A* gamma,
                                                  std::int64_t i) {
  const std::int64_t n = i / p.sh.groups, g = i % p.sh.groups, per = per_group(p.sh);
  grad_sums<A> r;
  for (std::int64_t c = g * per; c < (g + 1) * per; ++c) {
    grad_sums<A> ch;
    for (std::int64_t k = 0; k < p.chunks; ++k) ch = add_sums{}(ch, part[partial_index(p, n, k, c)]);
    const A gm = gamma ? gamma[c] : static_cast<A>(1);
    r.dy += gm * ch.dy;
    r.dy_xhat += gm * ch.dy_xhat;
  }
  return r;
}

// dbeta[c] and dgamma[c]: the sums over samples and chunks, in order.
template <class A>
MEMFMT_HOST_DEVICE grad_sums<A> merge_channel_grads(const reduce_plan& p, const grad_sums<A>* part, std::int64_t c) {
  grad_sums<A> r;
  for (std::int64_t n = 0; n < p.sh.n; ++n)
    for (std::int64_t k = 0; k < p.chunks; ++k) r = add_sums{}(r, part[partial_index(p, n, k, c)]);
  return r;
}

template <class A>
MEMFMT_HOST_DEVICE A normalize(A x, group_stats<A> st, const A* gamma, const A* beta, std::int64_t c) {
  const A v = (x - st.mean) * st.invstd;
  return (gamma ? v * gamma[c] : v) + (beta ? beta[c] : static_cast<A>(0));
}

// dx = invstd / m * (m g - sum(g) - xhat sum(g xhat)), m the number of elements of a group.
template <class A>
MEMFMT_HOST_DEVICE A input_grad(A x, A dy, group_stats<A> st, grad_sums<A> group, const A* gamma, std::int64_t c, A m) {
  const A g = gamma ? dy * gamma[c] : dy;
  const A xhat = (x - st.mean) * st.invstd;
  return st.invstd / m * (m * g - group.dy - xhat * group.dy_xhat);
}

// Workspace bytes of each pass.
template <class A>
std::int64_t forward_workspace_bytes(const reduce_plan& p) {
  return partials(p) * static_cast<std::int64_t>(sizeof(moments<A>));
}
template <class A>
std::int64_t backward_workspace_bytes(const reduce_plan& p) {
  return (partials(p) + p.sh.n * p.sh.groups) * static_cast<std::int64_t>(sizeof(grad_sums<A>));
}

}  // namespace memfmt::cudnn::gn
