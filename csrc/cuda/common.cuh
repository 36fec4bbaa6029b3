// Helpers shared by the CUDA kernels: launch sizes, sincos/exp overloads, block reductions.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

namespace rotmem::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over `work` items (capped; the loop covers the rest).
inline unsigned int grid_for(int64_t work, int threads = kThreads) {
  return static_cast<unsigned int>(std::clamp<int64_t>((work + threads - 1) / threads, 1, 1 << 20));
}

// Threads for a block that walks one row of `width` items: a multiple of 32, at most kThreads.
inline int threads_for_row(int64_t width) {
  return static_cast<int>(std::clamp<int64_t>((width + 31) / 32 * 32, 32, kThreads));
}

inline cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream(); }

// The CUDA device of an op's inputs, for its device guard: the dispatcher picks the CUDA kernel
// when any input is a CUDA tensor, so a CPU tensor among them is named here, with the op, before
// the guard or a kernel touches it (undefined tensors, absent optionals, are skipped).
inline c10::Device device_of(const char* op, std::initializer_list<std::pair<const char*, const at::Tensor*>> inputs) {
  const std::pair<const char*, const at::Tensor*>* first = nullptr;
  for (const auto& input : inputs) {
    if (input.second == nullptr || !input.second->defined()) continue;
    if (first == nullptr && input.second->is_cuda()) first = &input;
  }
  TORCH_CHECK(first != nullptr, op, ": no input is a CUDA tensor");
  const c10::Device device = first->second->device();
  for (const auto& [name, tensor] : inputs) {
    if (tensor == nullptr || !tensor->defined()) continue;
    TORCH_CHECK(tensor->device() == device, op, ": ", name, " is on ", tensor->device(), " but ", first->first,
                " is on ", device, "; every input must be on one CUDA device (move it there with .to(", device,
                "))");
  }
  return device;
}

// A tensor's data, or nullptr for an absent (undefined, or for outputs empty) optional one.
template <typename scalar_t>
const scalar_t* maybe(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr<scalar_t>() : nullptr;
}

template <typename scalar_t>
scalar_t* maybe_mut(at::Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.mutable_data_ptr<scalar_t>() : nullptr;
}

__device__ __forceinline__ void sin_cos(float t, float& s, float& c) { sincosf(t, &s, &c); }
__device__ __forceinline__ void sin_cos(double t, double& s, double& c) { sincos(t, &s, &c); }
__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block; every thread gets the result. `shared` holds 32 T.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : T(0);
    v = warp_sum(v);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

// (m, s) summarises values x as max m and sum of exp(x - m); merge two summaries.
template <typename T>
__device__ __forceinline__ void lse_merge(T& m, T& s, T m2, T s2) {
  if (m2 > m) {
    s = s * exp_(m - m2) + s2;
    m = m2;
  } else if (s2 > T(0)) {
    s += s2 * exp_(m2 - m);
  }
}

// Merge of the (m, s) summaries of the whole block; every thread gets the result.
template <typename T>
__device__ void block_lse(T& m, T& s, T* shared_m, T* shared_s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int offset = 16; offset > 0; offset >>= 1) {
    lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
  }
  __syncthreads();
  if (lane == 0) {
    shared_m[warp] = m;
    shared_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? shared_m[lane] : -INFINITY;
    s = lane < warps ? shared_s[lane] : T(0);
    for (int offset = 16; offset > 0; offset >>= 1) {
      lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
    }
    if (lane == 0) {
      shared_m[0] = m;
      shared_s[0] = s;
    }
  }
  __syncthreads();
  m = shared_m[0];
  s = shared_s[0];
}

}  // namespace rotmem::cuda
