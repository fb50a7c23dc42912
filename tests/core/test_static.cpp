// Compile-time properties (mdspan style): if this file compiles, every assertion holds.
#include <type_traits>

#include "memfmt/format/layout.hpp"
#include "memfmt/format/tags.hpp"
#include "memfmt/tensor/host_tensor.hpp"
#include "memfmt/tensor/tensor_view.hpp"

namespace {
using namespace memfmt;

// Tags: rank, stride order, 2-D/3-D relations.
static_assert(nchw::rank == 4 && nhwc::rank == 4 && ncdhw::rank == 5 && ndhwc::rank == 5);
static_assert(unit_dim_v<nchw> == 3 && unit_dim_v<nhwc> == 1 && unit_dim_v<ncdhw> == 4 && unit_dim_v<ndhwc> == 1);
static_assert(std::is_same_v<nchw::as_3d, ncdhw> && std::is_same_v<nhwc::as_3d, ndhwc>);
static_assert(std::is_same_v<ncdhw::as_2d, nchw> && std::is_same_v<ndhwc::as_2d, nhwc>);
static_assert(std::is_same_v<transposed_format_t<nchw>, nhwc> && std::is_same_v<transposed_format_t<ndhwc>, ncdhw>);
static_assert(memory_format_v<nchw> == memory_format::contiguous);
static_assert(memory_format_v<nhwc> == memory_format::channels_last);
static_assert(memory_format_v<ncdhw> == memory_format::contiguous);
static_assert(memory_format_v<ndhwc> == memory_format::channels_last_3d);
static_assert(spatial_rank_v<nhwc> == 2 && spatial_rank_v<ndhwc> == 3);
static_assert(is_format_v<nhwc> && !is_format_v<int>);

// Layouts are constexpr: offsets computed at compile time.
constexpr auto cl = layout<nhwc>::packed({2, 3, 4, 5});
static_assert(cl(0, 0, 0, 0) == 0 && cl(0, 1, 0, 0) == 1 && cl(0, 0, 0, 1) == 3 && cl(0, 0, 1, 0) == 15 &&
              cl(1, 0, 0, 0) == 60);
static_assert(cl.stride(1) == 1 && cl.stride(3) == 3 && cl.stride(2) == 15 && cl.stride(0) == 60);
static_assert(cl.required_span_size() == 120 && cl.numel() == 120 && cl.is_packed());
constexpr auto cf = layout<ncdhw>::packed({2, 3, 4, 5, 6});
static_assert(cf(1, 2, 3, 4, 5) == 2 * 3 * 4 * 5 * 6 - 1);
static_assert(layout<nchw>::unit_stride() == 1);
static_assert(std::is_nothrow_invocable_v<layout<nchw>, int, int, int, int>);

// Views: element const-ness converts one way only; formats never convert.
static_assert(std::is_convertible_v<nchw_view<float>, nchw_view<const float>>);
static_assert(!std::is_convertible_v<nchw_view<const float>, nchw_view<float>>);
static_assert(!std::is_convertible_v<nchw_view<float>, nhwc_view<float>>);
static_assert(!std::is_constructible_v<nhwc_view<float>, nchw_view<float>>);
static_assert(!std::is_convertible_v<nchw_view<float>, ncdhw_view<float>>);
static_assert(!std::is_convertible_v<nchw_view<float>, nchw_view<double>>);
static_assert(std::is_trivially_copyable_v<nhwc_view<float>>);  // passes to kernels by value
static_assert(std::is_trivially_copyable_v<layout<ndhwc>>);
static_assert(std::is_convertible_v<host_tensor<float, nhwc>&, nhwc_view<float>>);
static_assert(!std::is_convertible_v<host_tensor<float, nhwc>&, nchw_view<float>>);
static_assert(!std::is_convertible_v<const host_tensor<float, nhwc>&, nhwc_view<float>>);
static_assert(std::is_convertible_v<const host_tensor<float, nhwc>&, nhwc_view<const float>>);
static_assert(is_tensor_view_v<nhwc_view<int>> && !is_tensor_view_v<int>);
}  // namespace
